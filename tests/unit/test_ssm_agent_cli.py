"""The simulated SSM agent's command line (issue 17, point 6): every `SessionFaultSpec` field is a
`--fault NAME=VALUE`, validated by the model, listed by `--list-faults`; a bad one is one error
line and status 2. What the faults then do to a session is tests/functional/test_ssm_client.py."""

from __future__ import annotations

import re
from typing import NoReturn

import pytest

from hyperpod_nccl.ssm.client import CLIENT_VERSION
from hyperpod_nccl_sim.node_behaviours import SessionFaultSpec
from hyperpod_nccl_sim.ssm_agent import _compare_versions, fault_table, main, parse_faults

PROG = "python -m hyperpod_nccl_sim.ssm_agent"


def _error(message: str) -> NoReturn:
    raise AssertionError(message)


def test_list_faults_names_every_field_with_its_type_default_and_description(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["--list-faults"])
    out = capsys.readouterr().out
    assert out == fault_table() + "\n"
    rows = {parts[0]: parts[1:] for parts in (re.split(r" {2,}", line, maxsplit=2) for line in out.splitlines())}
    assert list(rows) == list(SessionFaultSpec.model_fields)
    for name, spec in SessionFaultSpec.model_fields.items():
        assert spec.description, f"{name} has no description for --list-faults"
        kind, description = rows[name]
        assert kind.endswith(f" = {spec.default!r}") and description == spec.description
    assert rows["drop_first"][0] == "int = 0"
    assert rows["stall_seconds"][0] == "float = 0.0"
    assert rows["stall_at_section"][0] == "str | None = None"
    assert rows["separate_output_streams"][0] == "bool = False"


def test_faults_are_parsed_from_text_by_the_model() -> None:
    items = [
        "drop_first=2",
        "duplicate=true",
        "reorder=yes",
        "stall_seconds=0.5",
        "stall_at_section=dcgm_health",
        "disconnect_after=3",
        "separate_output_streams=1",
    ]
    assert parse_faults(items, _error) == SessionFaultSpec(
        drop_first=2,
        duplicate=True,
        reorder=True,
        stall_seconds=0.5,
        stall_at_section="dcgm_health",
        disconnect_after=3,
        separate_output_streams=True,
    )
    assert parse_faults([], _error) == SessionFaultSpec()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fault", "drop_first=two"], "--fault drop_first='two': Input should be a valid integer"),
        (["--fault", "duplicate=maybe"], "--fault duplicate='maybe': Input should be a valid boolean"),
        (["--fault", "stall_seconds="], "--fault stall_seconds='': Input should be a valid number"),
        (["--fault", "drop_first"], "--fault 'drop_first': expected NAME=VALUE"),
        (["--fault", "=3"], "--fault '=3': expected NAME=VALUE"),
        (["--fault", "drop_frist=2"], "--fault drop_frist: no such fault; one of: drop_first, duplicate,"),
        (["--fault", "kms=true", "--fault", "kms=false"], "--fault kms: given twice"),
        (["--exit-code", "3"], "--exit-code needs --fault separate_output_streams=true"),
        (["--exit-code", "three"], "argument --exit-code: invalid int value: 'three'"),
    ],
    ids=["int", "bool", "empty", "no-equals", "no-name", "unknown", "twice", "exit-code-alone", "exit-code-text"],
)
def test_a_bad_argument_is_one_error_line_and_status_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"{PROG}: error: {message}"), last


def test_two_bad_values_are_reported_together_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--fault", "drop_first=x", "--fault", "reorder=sometimes"])
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
    assert len(errors) == 1
    assert "drop_first='x'" in errors[0] and "reorder='sometimes'" in errors[0]


@pytest.mark.parametrize(
    ("version", "older_or_equal"),
    [
        (CLIENT_VERSION, True),  # ours: a real agent in separate-stream mode asks it to upgrade
        ("1.2.295", True),
        ("1.2.295.0", False),  # one more component is newer: the agent compares strictly
        ("1.2.296.0", False),
        ("1.2.312.0", False),
        ("1.2.650.0", False),
        ("1.10.0.0", False),  # numerically, not as text
        ("", True),
    ],
)
def test_client_versions_compare_as_the_agent_compares_them(version: str, older_or_equal: bool) -> None:
    assert (_compare_versions(version, "1.2.295") <= 0) is older_or_equal
