"""One synthesis of the monitor per test session, shared by every infra test.

Bundling is skipped (`aws:cdk:bundling-stacks: []`): tests check the template, not the 48 MB layer.
cdk-nag runs exactly as in `make synth`, so a synthesis that succeeds here passed AwsSolutions.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

STACK_NAME = "HpncTest"
# Every optional feature on, two clusters in two regions, every default changed: each value can be
# traced from this context to the template.
TEST_CONTEXT: dict[str, Any] = {
    "aws:cdk:bundling-stacks": [],
    "stackName": STACK_NAME,
    "account": "111122223333",
    "region": "us-west-2",
    "clusters": [
        {"name": "ml-cluster-a", "region": "us-west-2"},
        {"name": "ml-cluster-b", "region": "us-east-1"},
    ],
    "sweepRateMinutes": 15,
    "nodeCoverage": 8,
    "mapMaxConcurrency": 10,
    "alertEmails": ["oncall@example.com", "ml-infra@example.com"],
    "slack": {"workspaceId": "T0123ABCD", "channelId": "C0123ABCD"},
    "referenceBaseUrl": "https://example.com/hyperpod-nccl/references",
    "historyRetentionDays": 30,
    "logRetentionDays": 14,
    "tableDeletionProtection": False,
    "missedSweepsBeforeAlarm": 2,
    "startSessionRate": 2,
    "logFilterRate": 4.5,
}


@dataclass(frozen=True)
class Synthesized:
    """The synthesized test stack: its template, where the assembly lives, and its metadata."""

    outdir: Path
    template: dict[str, Any]
    template_path: Path
    metadata: dict[str, list[dict[str, Any]]]

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        """Resources of one CloudFormation type, by logical id."""
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == resource_type}


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """Synthesize the app once (about 5 s); every infra test reads this."""
    from infra.app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    build_app(TEST_CONTEXT, outdir=str(outdir), cdk_json=None).synth()
    template_path = outdir / f"{STACK_NAME}.template.json"
    return Synthesized(
        outdir=outdir,
        template=json.loads(template_path.read_text()),
        template_path=template_path,
        metadata=json.loads((outdir / f"{STACK_NAME}.metadata.json").read_text()),
    )
