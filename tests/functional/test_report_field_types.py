"""What the JSON report writes (issue 14): a number is a number (`"xid": 79`, never `"79"`), and a
GPU's PCI bus id has one spelling wherever we write it (verbatim log lines in `evidence` aside)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from hyperpod_nccl.models.node_probe import canonical_pci_bus_id
from hyperpod_nccl_sim.scenario import available_scenarios

NUMBER_AS_TEXT = re.compile(r"-?\d+(?:\.\d+)?")
# Identifiers keep their spelling even when all digits: the fingerprint's `signature` (never
# retyped: it is a stored identity) and a Slurm job id (`4211` next to its step `4211.0`).
IDENTIFIER_FIELDS = frozenset({"signature", "job"})
PCI_ADDRESS = re.compile(r"\b[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?\b")


def _report(cli: Any, scenario: str) -> dict[str, Any]:
    run = cli("demo", "--scenario", scenario, "--format", "json", "--no-color")
    assert run.code == 0, run.stderr
    [document] = json.loads(run.stdout)  # demo's JSON: one report per scenario, in one array
    assert isinstance(document, dict)
    return document


def numbers_as_text(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(check id, field, value) of every finding field that is a number spelled as text."""
    found = []
    for finding in document["findings"]:
        fields = finding["fields"]
        for name, value in fields.items():
            if name in IDENTIFIER_FIELDS or not isinstance(value, str) or not NUMBER_AS_TEXT.fullmatch(value):
                continue
            if name == "value" and "variable" in fields:
                continue  # an environment variable's value is text (`NCCL_P2P_DISABLE=1`)
            found.append((finding["check_id"], name, value))
    return found


def _written_text(node: Any, key: str = "") -> Iterator[str]:
    """Every string of the report but the `evidence` lines (those are copied from logs as they are)."""
    if isinstance(node, dict):
        for name, value in node.items():
            yield from _written_text(value, name)
    elif isinstance(node, list):
        if key != "evidence":
            for value in node:
                yield from _written_text(value, key)
    elif isinstance(node, str):
        yield node


def bus_id_spellings(document: dict[str, Any]) -> dict[tuple[int, int], set[str]]:
    """Each GPU (bus, device) the report names outside verbatim evidence → the spellings used."""
    spellings: dict[tuple[int, int], set[str]] = {}
    for text in _written_text(document):
        for match in PCI_ADDRESS.finditer(text):
            bus, device = match.group(0).split(".")[0].split(":")[-2:]
            spellings.setdefault((int(bus, 16), int(device, 16)), set()).add(match.group(0))
    return spellings


@pytest.mark.parametrize("scenario", available_scenarios())
def test_no_finding_field_is_a_number_spelled_as_text(cli, scenario: str) -> None:  # type: ignore[no-untyped-def]
    document = _report(cli, scenario)
    assert document["findings"]
    assert numbers_as_text(document) == []


def test_a_gpu_has_one_bus_id_spelling_in_the_eks_p5_report(cli) -> None:  # type: ignore[no-untyped-def]
    document = _report(cli, "eks-p5")
    spellings = bus_id_spellings(document)
    # The Xid and fallen-off-the-bus signatures both name GPU 53:00, from lines that spell it apart.
    assert spellings[(0x53, 0x00)] == {"0000:53:00.0"}
    for gpu, written in spellings.items():
        assert len(written) == 1 and canonical_pci_bus_id(next(iter(written))) in written, (gpu, written)
    xid = next(f for f in document["findings"] if f["check_id"] == "logs.signatures" and f["fields"].get("xid"))
    assert xid["fields"]["xid"] == 79 and xid["fields"]["pci_bus_id"] == "0000:53:00.0"


def test_the_guards_see_a_planted_violation() -> None:
    planted = {
        "findings": [
            {"check_id": "logs.signatures", "fields": {"xid": "79", "signature": "xid", "pci_bus_id": "0000:53:00"}},
            {"check_id": "node.gpu_row_remap", "fields": {}, "detail": "00000000:53:00.0 pending", "evidence": []},
        ]
    }
    assert numbers_as_text(planted) == [("logs.signatures", "xid", "79")]
    assert bus_id_spellings(planted)[(0x53, 0x00)] == {"0000:53:00", "00000000:53:00.0"}
