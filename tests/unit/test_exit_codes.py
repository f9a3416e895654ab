"""The exit codes have one home (`cli/exit_codes.py`), the README's table lists each of them, and no
command spells one as a number (issue 14, point 7)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hyperpod_nccl.cli import exit_codes
from hyperpod_nccl.cli.exit_codes import EXIT_FAIL_ON, EXIT_OK, EXIT_PARTIAL, EXIT_PREREQUISITE, most_severe

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "functions" / "hyperpod_nccl" / "cli"
CODES = {name: value for name, value in vars(exit_codes).items() if name.startswith("EXIT_")}


def test_the_readme_table_lists_every_exit_code_once() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = [int(code) for code in re.findall(r"^\| `(\d+)` \|", readme, flags=re.MULTILINE)]
    assert sorted(listed) == sorted(CODES.values())


def test_codes_are_distinct_and_keep_the_original_meanings() -> None:
    assert len(set(CODES.values())) == len(CODES)
    # The original skill: 0 completed, 1 a prerequisite missing or the cluster unreachable.
    assert (EXIT_OK, EXIT_PREREQUISITE) == (0, 1)


def _numeric_exits(path: Path) -> list[str]:
    """`return 3`, `SystemExit(2)`, `sys.exit(1)` and `x = 0 if ... else 1` style literals in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        values: list[ast.expr] = []
        if isinstance(node, ast.Return) and node.value is not None:
            values = [
                node.value,
                *(getattr(node.value, attr) for attr in ("body", "orelse") if hasattr(node.value, attr)),
            ]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
            "exit",
            "SystemExit",
        ):
            values = list(node.args)
        found += [f"{path.name}:{v.lineno}" for v in values if isinstance(v, ast.Constant) and type(v.value) is int]
    return found


def test_no_command_spells_an_exit_code_as_a_number() -> None:
    spelled = [
        hit for path in sorted(CLI.rglob("*.py")) if path.name != "exit_codes.py" for hit in _numeric_exits(path)
    ]
    assert not spelled, f"exit codes spelled as numbers (use cli.exit_codes): {spelled}"


def test_partial_ranks_below_every_other_failure_when_runs_combine() -> None:
    assert most_severe([EXIT_PARTIAL, EXIT_FAIL_ON]) == EXIT_FAIL_ON
    assert most_severe([EXIT_OK, EXIT_PARTIAL]) == EXIT_PARTIAL
    assert most_severe([]) == EXIT_OK


def test_every_help_ends_with_examples_and_every_exit_code(capsys) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from hyperpod_nccl.cli.main import build_parser, main

    assert set(exit_codes.ONE_LINE_MEANINGS) == set(CODES.values())
    commands = [None, *build_parser()._subparsers._group_actions[0].choices]  # type: ignore[union-attr]
    for command in [*commands, "bench sweep"]:  # bench's action has a help of its own
        with pytest.raises(SystemExit) as exited:
            main([*command.split(), "--help"] if command else ["--help"])
        assert exited.value.code == 0
        shown = capsys.readouterr().out
        assert "examples:\n  hyperpod-nccl " in shown, command
        for code in CODES.values():
            assert f"\n  {code:<4} " in shown, (command, code)
