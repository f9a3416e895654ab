"""The CDK app: `python -m infra.app` (what cdk.json runs) synthesizes the monitor into `cdk.out`
(or `$CDK_OUTDIR`) offline, with no AWS account and no Docker.

cdk-nag's AwsSolutions pack validates the app during synthesis; a finding that is not acknowledged
(see infra/nag.py) fails the synth.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment, Tags, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import StageConfig
from infra.constants import CDK_JSON, DEFAULT_OUTDIR, OFFLINE_ACCOUNT, OFFLINE_REGION, PLACEHOLDER_CLUSTER
from infra.stack import MonitorStack

# The configuration's keys are plain camelCase words; the CDK's own context keys (feature flags,
# `aws:cdk:*` settings, cached lookups, `acknowledged-issue-numbers`) all contain punctuation.
_CONFIG_KEY_SHAPE = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


def _check_context_keys(context: Mapping[str, Any]) -> None:
    """Reject misspelt configuration keys instead of silently deploying defaults."""
    known = set(StageConfig.context_keys())
    unknown = sorted(k for k in context if k not in known and _CONFIG_KEY_SHAPE.match(k))
    if unknown:
        raise ValueError(f"unknown context keys {unknown}; the configuration keys are {sorted(known)}")


NO_ALERT_DESTINATION = (
    "no alert destination: alertEmails is empty and slack is null, so findings are stored but nobody is "
    "told (set -c alertEmails='[\"oncall@example.com\"]' or slack)"
)


def _check_deployable(config: StageConfig) -> None:
    """Refuse the shipped placeholder cluster (a stack that watches a cluster nobody has), and say
    on stderr when no alert destination is set (a monitor that tells nobody)."""
    if any(cluster.name == PLACEHOLDER_CLUSTER for cluster in config.clusters):
        raise ValueError(
            f"cdk.json still watches the placeholder cluster {PLACEHOLDER_CLUSTER!r}: set clusters to yours, e.g. "
            '-c clusters=\'[{"name": "ml-cluster", "region": "us-west-2"}]\' (README: Deploying the monitor)'
        )
    if not config.alert_emails and config.slack is None:
        sys.stderr.write(f"warning: {NO_ALERT_DESTINATION}\n")


def _cdk_json_context(path: Path | None) -> dict[str, Any]:
    """cdk.json's context when the app runs without the CDK CLI (which otherwise passes it in
    CDK_CONTEXT_JSON, merged with its `-c` overrides)."""
    if path is None or "CDK_CONTEXT_JSON" in os.environ or not path.is_file():
        return {}
    context: dict[str, Any] = json.loads(path.read_text()).get("context", {})
    return context


def build_app(
    context: Mapping[str, Any] | None = None, *, outdir: str | None = None, cdk_json: Path | None = CDK_JSON
) -> App:
    """The app with its one stack. `context` overrides cdk.json's (pass `cdk_json=None` to ignore it)."""
    app = App(
        context={**_cdk_json_context(cdk_json), **(context or {})},
        outdir=outdir or os.environ.get("CDK_OUTDIR") or str(DEFAULT_OUTDIR),
    )
    _check_context_keys(app.node.get_all_context())
    config = StageConfig.from_context(app.node.try_get_context)
    _check_deployable(config)
    # The CDK CLI exports the deploying account and region; offline synthesis uses fixed dummies so
    # nothing is ever looked up.
    env = Environment(
        account=config.account or os.environ.get("CDK_DEFAULT_ACCOUNT") or OFFLINE_ACCOUNT,
        region=config.region or os.environ.get("CDK_DEFAULT_REGION") or OFFLINE_REGION,
    )
    stack = MonitorStack(
        app,
        config.stack_name,
        config=config,
        env=env,
        description="hyperpod-nccl-monitor: read-only NCCL health sweeps of SageMaker HyperPod clusters",
    )
    Tags.of(stack).add("application", "hyperpod-nccl-monitor")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def main() -> None:
    """Synthesize the cloud assembly; a configuration the stack refuses (the placeholder cluster, a
    misspelt key, a bad value) is one line on stderr and exit 2, not a traceback."""
    try:
        app = build_app()
    except ValueError as error:  # pydantic's ValidationError is one too
        sys.stderr.write(f"hyperpod-nccl-monitor: error: {'; '.join(str(error).splitlines())}\n")
        raise SystemExit(2) from None
    app.synth()


if __name__ == "__main__":
    main()
