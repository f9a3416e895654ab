"""The deployment's configuration: one validated model read from the CDK context (cdk.json or `-c`).

Every value is documented in README.md ("Deploying the monitor"); the keys below are the context
keys, in camelCase as cdk.json spells them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from hyperpod_nccl.monitor.settings import DEFAULT_MAP_MAX_CONCURRENCY, MonitorSettings, WatchedCluster
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
# Inline Map states run at most 40 iterations at once, and every probe opens an SSM session (the
# StartSession rate is account-wide), so the ceiling is deliberately that.
MAX_MAP_CONCURRENCY = 40


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
