"""The deployment's configuration: one validated model read from the CDK context (cdk.json or `-c`).

Every value is documented in README.md ("Deploying the monitor"); the keys below are the context
keys, in camelCase as cdk.json spells them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from hyperpod_nccl import thresholds
from hyperpod_nccl.monitor.settings import (
    DEFAULT_MAP_MAX_CONCURRENCY,
    PROBE_TIMEOUT_SECONDS,
    MonitorSettings,
    WatchedCluster,
)
from infra.constants import STACK_ID_DEFAULT

# The retention values CloudWatch Logs accepts (PutRetentionPolicy).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
# The most node probes one sweep may run at once (mapMaxConcurrency; each sweep sizes its own
# concurrency below it from its probe times). More than the account's StartSession rate can start
# within the probe state's whole timeout can never all be busy: the rest would only wait for the
# rate, each a concurrent ProbeNode Lambda of the Region's shared pool (1,000 by default, Lambda
# quotas: https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
MAX_MAP_CONCURRENCY = int(thresholds.SSM_START_SESSION_PER_SECOND * PROBE_TIMEOUT_SECONDS)
# The node count the nodes x cadence check assumes for a watched cluster whose entry names no
# `expectedNodes`: the reference size of BENCHMARKS.md's cost model (256 nodes every 15 minutes).
DEFAULT_EXPECTED_NODES = 256


class SlackChannel(BaseModel):
    """A Slack channel of AWS Chatbot (Amazon Q Developer in chat applications).

    The workspace must have been authorised once in the Chatbot console; its id is shown there.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    workspace_id: str = Field(pattern=r"^[0-9A-Z]{1,255}$", description="Slack workspace (team) id, e.g. T0123ABCD")
    channel_id: str = Field(pattern=r"^[A-Za-z0-9]{1,255}$", description="Slack channel id, e.g. C0123ABCD")


class StageConfig(BaseModel):
    """Everything a deployment can change; defaults make `make synth` work with no context at all."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    stack_name: str = Field(default=STACK_ID_DEFAULT, pattern=r"^[A-Za-z][A-Za-z0-9-]{0,100}$")
    account: str | None = Field(default=None, pattern=r"^\d{12}$")
    region: str | None = None
    clusters: list[WatchedCluster] = Field(default_factory=list)
    sweep_rate_minutes: int = Field(default=30, ge=5, le=24 * 60)
    node_coverage: int | Literal["all"] = "all"
    map_max_concurrency: int = Field(default=DEFAULT_MAP_MAX_CONCURRENCY, ge=1, le=MAX_MAP_CONCURRENCY)
    alert_emails: list[str] = Field(default_factory=list)
    slack: SlackChannel | None = None
    reference_base_url: str = Field(
        default=str(MonitorSettings.model_fields["reference_base_url"].default), pattern=r"^https://\S+$"
    )
    history_retention_days: int = Field(default=90, ge=1, le=3650)
    log_retention_days: int = 30
    table_deletion_protection: bool = True
    missed_sweeps_before_alarm: int = Field(default=3, ge=1, le=48)
    # The account-wide rates the monitor's sandboxes share (per second; docs/pacing.md): lower the
    # StartSession one to leave room for people and CLI runs of the same account.
    start_session_rate: float = Field(default=thresholds.SSM_START_SESSION_PER_SECOND, gt=0)
    log_filter_rate: float = Field(default=thresholds.LOG_FILTER_CALLS_PER_SECOND, gt=0)

    @field_validator("node_coverage", mode="before")
    @classmethod
    def _coverage(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() == "all":
            return "all"
        if isinstance(value, str):
            return int(value)
        return value

    @field_validator("node_coverage")
    @classmethod
    def _positive_coverage(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("nodeCoverage is 'all' or a number of nodes >= 1")
        return value

    @field_validator("alert_emails")
    @classmethod
    def _emails(cls, value: list[str]) -> list[str]:
        bad = [address for address in value if not _EMAIL.match(address)]
        if bad:
            raise ValueError(f"not e-mail addresses: {', '.join(bad)}")
        return value

    @field_validator("region")
    @classmethod
    def _region(cls, value: str | None) -> str | None:
        if value is not None and not _REGION.match(value):
            raise ValueError(f"not an AWS region: {value}")
        return value

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"logRetentionDays must be one of {LOG_RETENTION_DAYS}")
        return value

    @model_validator(mode="after")
    def _distinct_clusters(self) -> StageConfig:
        seen: set[tuple[str, str]] = set()
        for cluster in self.clusters:
            if not _REGION.match(cluster.region):
                raise ValueError(f"cluster {cluster.name}: not an AWS region: {cluster.region}")
            key = (cluster.name, cluster.region)
            if key in seen:
                raise ValueError(f"cluster {cluster.name} in {cluster.region} is listed twice")
            seen.add(key)
        return self

    @model_validator(mode="after")
    def _sweeps_fit_the_cadence(self) -> StageConfig:
        problem = self.cadence_overrun()
        if problem:
            raise ValueError(problem)
        return self

    def nodes_per_sweep(self, cluster: WatchedCluster) -> int:
        """The nodes one sweep of `cluster` probes: its `expectedNodes` (DEFAULT_EXPECTED_NODES when
        unset), at most `nodeCoverage`."""
        nodes = cluster.expected_nodes or DEFAULT_EXPECTED_NODES
        return nodes if self.node_coverage == "all" else min(nodes, self.node_coverage)

    def sweep_seconds(self) -> float:
        """The shortest time in which one scheduled sweep of every watched cluster can probe its
        nodes (they start together and share the account's StartSession rate, `startSessionRate`):
        issue 15's bound, max(all nodes / rate, each cluster's nodes x probe / its probes at once)
        + one probe, with thresholds.EXPECTED_PROBE_SECONDS as the probe."""
        if not self.clusters:
            return 0.0
        counts = [self.nodes_per_sweep(cluster) for cluster in self.clusters]
        by_rate = sum(counts) / self.start_session_rate
        by_concurrency = max(counts) * thresholds.EXPECTED_PROBE_SECONDS / self.map_max_concurrency
        return max(by_rate, by_concurrency) + thresholds.EXPECTED_PROBE_SECONDS

    def cadence_overrun(self) -> str | None:
        """Why the sweeps of the watched clusters cannot fit the schedule's cadence at the configured
        StartSession rate (each would still run when the next is due, and the per-cluster lock would
        fold ticks into follow-ups that never catch up), with the numbers and the fixes; None when
        they fit."""
        rate_per_second = self.start_session_rate
        needed = self.sweep_seconds()
        cadence = self.sweep_rate_minutes * 60
        if needed <= cadence:
            return None
        counts = ", ".join(f"{c.name} {self.nodes_per_sweep(c)}" for c in self.clusters)
        total = sum(self.nodes_per_sweep(c) for c in self.clusters)
        return (
            f"the watched clusters' sweeps do not fit sweepRateMinutes={self.sweep_rate_minutes} ({cadence} s):"
            f" {total} nodes per sweep ({counts}; expectedNodes per cluster, {DEFAULT_EXPECTED_NODES} when unset,"
            f" at most nodeCoverage) take at least {needed:.0f} s at {rate_per_second:g} StartSession calls/s"
            f" shared by the account and {self.map_max_concurrency} probes at once per cluster (max({total} / "
            f"{rate_per_second:g}, nodes x {thresholds.EXPECTED_PROBE_SECONDS:g} s / {self.map_max_concurrency})"
            f" + one {thresholds.EXPECTED_PROBE_SECONDS:g} s probe), so sweeps would overlap. Fix one of: a longer"
            f" sweepRateMinutes (at least {math.ceil(needed / 60)}); a higher StartSession rate if the"
            f" account's quota allows; fewer nodes per sweep (nodeCoverage); a higher mapMaxConcurrency"
            f" (at most {MAX_MAP_CONCURRENCY}) if the probes at once are the bound; or correct expectedNodes"
        )

    @property
    def cluster_regions(self) -> list[str]:
        """Regions of the watched clusters, sorted (IAM resources are scoped to them)."""
        return sorted({cluster.region for cluster in self.clusters})

    @classmethod
    def context_keys(cls) -> list[str]:
        """Every context key this model reads, as cdk.json spells it."""
        return [field.alias or name for name, field in cls.model_fields.items()]

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> StageConfig:
        """Read the model from a context getter (`app.node.try_get_context`).

        `-c key=value` on the CDK command line always yields a string, so a string that holds a JSON
        list or object is decoded before validation.
        """
        values: dict[str, Any] = {}
        for key in cls.context_keys():
            value = get(key)
            if value is None:
                continue
            if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
                value = json.loads(value)
            values[key] = value
        return cls.model_validate(values)
