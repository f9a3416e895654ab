"""A node that answers with nothing, or with an answer cut off before the script's end, is a
finding, not silence (issue 17, point 7)."""

from __future__ import annotations

from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.findings import Status
from hyperpod_nccl.probe.parsers import parse_node_probe
from hyperpod_nccl.probe.sections import SECTIONS, begin_line, end_line
from hyperpod_nccl_sim.node_behaviours import NodeBehaviour
from hyperpod_nccl_sim.nodes import render_node_probe
from tests.builders import probed_node

CHECKS = discover()


def _answered(text: str, exit_code: int | None = 0):  # type: ignore[no-untyped-def]
    inv = probed_node(
        parse_node_probe(text),
        exit_code=exit_code,
        complete=exit_code is not None,
        output_bytes=len(text.encode()),
    )
    return CHECKS["node.reachability"].run(inv)


def test_an_empty_answer_is_said() -> None:
    (finding,) = _answered("")
    assert finding.status is Status.WARN and finding.title.endswith("gave an empty answer")
    assert finding.fields["missing_sections"] == len(SECTIONS["node"])


def test_a_cut_off_answer_names_what_is_missing() -> None:
    full = (
        "".join("\n".join([begin_line(name), end_line(name, 0)]) + "\n" for name in SECTIONS["node"][:3])
        + begin_line(SECTIONS["node"][3])
        + "\npartial line\n"
    )
    (finding,) = _answered(full, exit_code=None)
    assert "cut-off answer" in finding.title and f"sections {SECTIONS['node'][3]}.." in finding.title


def test_a_whole_answer_gives_no_reachability_finding() -> None:
    whole = "".join("\n".join([begin_line(name), end_line(name, 0)]) + "\n" for name in SECTIONS["node"])
    assert _answered(whole) == []
    # the simulation answers every section too, on a GPU node and on a CPU node
    for instance_type in ("ml.p5.48xlarge", "ml.m5.xlarge"):
        text = render_node_probe(NodeBehaviour(), instance_type, "host", "k")
        ended = {s.name for s in parse_node_probe(text).sections if s.rc is not None}
        # render_nccl_job answers the job's sections
        job = {
            "nccl_jobs",
            "nccl_job_env",
            "nccl_job",
            "nccl_ras",
            "flight_recorder",
            "nccl_net_plugin",
            "process_limits",
        }
        assert set(SECTIONS["node"]) - ended == job, instance_type
