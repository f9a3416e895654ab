"""Which process the hang evidence was read from, and the settings of it the probe refused
(`hang.evidence_source`): parsed from the probe's `nccl_job`, `nccl_ras` and `flight_recorder`
sections, evaluated as a pure check."""

from __future__ import annotations

from datetime import UTC, datetime

from hyperpod_nccl import references
from hyperpod_nccl.checks.hang_attribution import _REFUSALS, hang_evidence_source
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import NcclJobChoice, NodeProbeData, NodeProbeResult
from hyperpod_nccl.probe.parsers import parse_node_probe
from tests.builders import inventory, probed

NOW = datetime(2026, 1, 1, tzinfo=UTC)
WHY = "lowest pid of the python/torchrun processes with NCCL or TORCH_NCCL settings"
RAS_REFUSED = "skipped: NCCL_RAS_ADDR of pid 4242 is not host:port of this node (not queried)"
PREFIX_REFUSED = (
    "skipped: TORCH_NCCL_DEBUG_INFO_TEMP_FILE of pid 4242 not a plain absolute path "
    "(reading the default /tmp/nccl_trace_rank_)"
)
NO_DEFAULT_DIR = "skipped: /tmp/ is not a directory reached without links in the root of pid 4242"


def _section(name: str, lines: list[str], rc: int = 0) -> str:
    return "\n".join([f"@@BEGIN {name}", *lines, f"@@END {name} rc={rc}"]) + "\n"


def _hostile_node_output(*, ras_rc: int = 2, pid: int = 4242) -> str:
    return (
        _section("nccl_job", [f"pid={pid} uid=1000 comm=python candidates=3 why={WHY}"])
        + _section("nccl_ras", [RAS_REFUSED], rc=ras_rc)
        + _section("flight_recorder", [PREFIX_REFUSED, NO_DEFAULT_DIR], rc=1)
    )


def _inventory(*probes: NodeProbeData) -> Inventory:
    results = [
        NodeProbeResult(instance_id=f"i-{n:017x}", instance_group="worker", reachable=True, probe=probe)
        for n, probe in enumerate(probes)
    ]
    return inventory(cluster="ml", at=NOW, node_probes=probed(results))


def _job(pid: int = 4242, uid: int | None = 1000, **refused: str) -> NcclJobChoice:
    return NcclJobChoice(pid=pid, uid=uid, command="python", candidates=3, reason=WHY, refused=refused)


# --- parsing ---------------------------------------------------------------------------------------


def test_the_probes_refusals_are_parsed_per_setting_of_the_chosen_job() -> None:
    probe = parse_node_probe(_hostile_node_output())
    assert probe.nccl_job is not None and probe.nccl_job.label == "pid 4242 (python, uid 1000)"
    assert probe.nccl_job.refused == {"NCCL_RAS_ADDR": RAS_REFUSED, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": PREFIX_REFUSED}
    # Both reasons the dumps were not read are kept, not only the first.
    assert probe.flight_recorder_error == f"{PREFIX_REFUSED}; {NO_DEFAULT_DIR}"


def test_an_answer_on_the_ras_port_cannot_pose_as_a_refusal() -> None:
    # nc ran (rc 0): the line came from whoever listens on the port, not from the probe.
    assert parse_node_probe(_hostile_node_output(ras_rc=0)).nccl_job.refused.keys() == {  # type: ignore[union-attr]
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
    }
    # A refusal naming another pid than the chosen job is not believed either.
    assert parse_node_probe(_hostile_node_output(pid=77)).nccl_job.refused == {}  # type: ignore[union-attr]


def test_unknown_user_and_command_are_said_so() -> None:
    assert NcclJobChoice(pid=7).label == "pid 7 (command unknown, uid unknown)"


# --- the check -------------------------------------------------------------------------------------


def test_no_job_on_any_node_says_nothing() -> None:
    no_job = NodeProbeData(
        flight_recorder_error="skipped: no NCCL job runs on this node (no Flight Recorder dump to read)"
    )
    assert hang_evidence_source.run(_inventory(no_job, NodeProbeData())) == []


def test_one_node_names_the_process_user_and_why_no_dump_or_ras_was_read() -> None:
    probe = NodeProbeData(
        nccl_job=_job(),
        flight_recorder_error=NO_DEFAULT_DIR,
        ras_error="nc: connect to localhost port 28028 (tcp) failed: Connection refused",
    )
    [finding] = hang_evidence_source.run(_inventory(probe))
    assert finding.status == Status.INFO and finding.priority is None
    assert finding.title == f"hang evidence on i-{0:017x} (worker) read from pid 4242 (python, uid 1000)"
    [line] = finding.evidence
    assert line.startswith(f"i-{0:017x} (worker): pid 4242 (python, uid 1000), 1 of 3 candidate(s) ({WHY})")
    assert f"Flight Recorder {NO_DEFAULT_DIR}" in line and "NCCL RAS: nc: connect to localhost" in line
    assert finding.reference == references.DBG_FLIGHT_RECORDER


def test_refused_settings_are_p2_warnings_naming_node_pid_and_user() -> None:
    hostile = NodeProbeData(
        nccl_job=_job(NCCL_RAS_ADDR=RAS_REFUSED, TORCH_NCCL_DEBUG_INFO_TEMP_FILE=PREFIX_REFUSED),
        ras_error=RAS_REFUSED,
        flight_recorder_error=f"{PREFIX_REFUSED}; {NO_DEFAULT_DIR}",
    )
    plain = NodeProbeData(nccl_job=_job(pid=4300, uid=0))
    findings = hang_evidence_source.run(_inventory(hostile, plain))
    by_signature = {f.fields.get("signature"): f for f in findings if f.status == Status.WARN}
    assert set(by_signature) == {"NCCL_RAS_ADDR", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}
    ras = by_signature["NCCL_RAS_ADDR"]
    assert ras.priority == Priority.P2 and ras.reference == references.DBG_NCCL_RAS
    assert ras.title == (
        "NCCL_RAS_ADDR of the NCCL job on 1 node(s) is not host:port of the node itself: NCCL RAS was not asked there"
    )
    assert ras.evidence == [f"i-{0:017x} (worker): pid 4242 (python, uid 1000): {RAS_REFUSED}"]
    assert [r.id for r in ras.resources] == [f"i-{0:017x}"]
    assert "misconfiguration" in ras.detail and "planted" in ras.detail
    prefix = by_signature["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]
    assert prefix.reference == references.DBG_FLIGHT_RECORDER and "default dump prefix was read" in prefix.title
    # The fleet note names both processes and both users; the refusals are not repeated in it,
    # but why the default prefix gave nothing either still is.
    [info] = [f for f in findings if f.status == Status.INFO]
    assert info.title == "hang evidence read from one NCCL process per node on 2 nodes (uids 0, 1000)"
    assert RAS_REFUSED not in info.evidence[0] and PREFIX_REFUSED not in info.evidence[0]
    assert info.evidence[0].endswith(f"; Flight Recorder {NO_DEFAULT_DIR}")
    assert info.evidence[1].startswith(f"i-{1:017x} (worker): pid 4300 (python, uid 0)")


def test_thousands_of_nodes_list_twenty_and_count_the_rest() -> None:
    probes = [NodeProbeData(nccl_job=_job(NCCL_RAS_ADDR=RAS_REFUSED)) for _ in range(2_500)]
    findings = hang_evidence_source.run(_inventory(*probes))
    assert len(findings) == 2
    for finding in findings:
        assert len(finding.evidence) == 21 and finding.evidence[-1] == "… and 2480 more node(s)"
        assert len(finding.resources) == 2_500 and finding.fields["nodes"] == 2_500


def test_every_refusal_the_parser_knows_has_a_pointer_that_resolves() -> None:
    probe = parse_node_probe(_hostile_node_output())
    assert probe.nccl_job is not None and set(probe.nccl_job.refused) == set(_REFUSALS)
    for _what, _why, reference in _REFUSALS.values():
        assert references.section_heading(reference)
