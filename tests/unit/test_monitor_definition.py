"""The contract between the runtime and infra: handlers, environment names, ASL placeholders."""

from __future__ import annotations

import importlib

from hyperpod_nccl.monitor import asl_placeholders, load_definition
from hyperpod_nccl.monitor.settings import (
    ASL_FUNCTION_PLACEHOLDERS,
    ASL_MAP_CONCURRENCY_PLACEHOLDER,
    ASL_PROBE_TIMEOUT_PLACEHOLDER,
    FUNCTION_ENVIRONMENT,
    PROBE_TIMEOUT_SECONDS,
    MonitorSettings,
    handler_path,
)


def _substitutions() -> dict[str, str | int]:
    values: dict[str, str | int] = {
        placeholder: f"arn:aws:lambda:us-west-2:123456789012:function:{module}"
        for module, placeholder in ASL_FUNCTION_PLACEHOLDERS.items()
    }
    values[ASL_MAP_CONCURRENCY_PLACEHOLDER] = 7
    values[ASL_PROBE_TIMEOUT_PLACEHOLDER] = PROBE_TIMEOUT_SECONDS
    return values


def test_every_handler_module_exists_and_exposes_handler() -> None:
    for module in FUNCTION_ENVIRONMENT:
        path, attribute = handler_path(module).rsplit(".", 1)
        assert callable(getattr(importlib.import_module(path), attribute))


def test_placeholders_are_exactly_the_declared_ones() -> None:
    assert asl_placeholders() == set(_substitutions())


def test_probe_state_has_budget_transient_retry_and_catch_to_unreachable() -> None:
    definition = load_definition(_substitutions())
    branches = definition["States"]["Collect"]["Branches"]
    probe_map = next(b for b in branches if b["StartAt"] == "ProbeNodes")["States"]["ProbeNodes"]
    assert probe_map["MaxConcurrency"] == 7
    assert probe_map["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "EXPRESS"}
    assert probe_map["ItemSelector"]["instance_ids.$"] == "$$.Map.Item.Value"
    batch = probe_map["ItemProcessor"]["States"]["ProbeBatch"]
    assert batch["ItemSelector"]["instance_id.$"] == "$$.Map.Item.Value"
    probe = batch["ItemProcessor"]["States"]["ProbeNode"]
    assert probe["TimeoutSeconds"] == PROBE_TIMEOUT_SECONDS
    retried = {e for r in probe["Retry"] for e in r["ErrorEquals"]}
    assert "States.ALL" not in retried and "States.Timeout" not in retried
    assert all(e.startswith("Lambda.") for e in retried)
    assert probe["Catch"][0]["ErrorEquals"] == ["States.ALL"]
    assert probe["Catch"][0]["Next"] == "NodeUnreachable"


def test_settings_read_from_environment() -> None:
    settings = MonitorSettings.from_env(
        {
            "FINDINGS_TABLE_NAME": "t",
            "NODE_COVERAGE": "5",
            "WATCHED_CLUSTERS": '[{"name": "hp1", "region": "us-east-1"}]',
            "HISTORY_RETENTION_DAYS": "30",
        }
    )
    assert settings.require_table() == "t"
    assert settings.node_coverage == 5
    assert settings.clusters[0].name == "hp1"
    assert settings.history_seconds == 30 * 86400
    assert MonitorSettings.from_env({"NODE_COVERAGE": "all"}).node_coverage == "all"
