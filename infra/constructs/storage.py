"""The monitor's DynamoDB table, built from the runtime's `TABLE_SCHEMA` (the one definition of its keys)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from hyperpod_nccl.monitor.settings import TABLE_SCHEMA

_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER, "B": dynamodb.AttributeType.BINARY}
_PROJECTIONS = {"ALL": dynamodb.ProjectionType.ALL, "KEYS_ONLY": dynamodb.ProjectionType.KEYS_ONLY}


def _attribute(spec: Mapping[str, str]) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=spec["name"], type=_TYPES[spec["type"]])


class FindingsStorage(Construct):
    """One on-demand table: findings, their history, sweeps, per-node and per-GPU fault history.

    Encrypted with the AWS managed key, point-in-time recovery on, TTL on the schema's attribute.
    """

    def __init__(self, scope: Construct, construct_id: str, *, deletion_protection: bool) -> None:
        super().__init__(scope, construct_id)
        schema = cast(Mapping[str, Any], TABLE_SCHEMA)
        indexes = [
            dynamodb.GlobalSecondaryIndexPropsV2(
                index_name=index["index_name"],
                partition_key=_attribute(index["partition_key"]),
                sort_key=_attribute(index["sort_key"]) if index.get("sort_key") else None,
                projection_type=_PROJECTIONS[index.get("projection", "ALL")],
            )
            for index in schema.get("global_secondary_indexes", [])
        ]
        self.table = dynamodb.TableV2(
            self,
            "Table",
            partition_key=_attribute(schema["partition_key"]),
            sort_key=_attribute(schema["sort_key"]) if schema.get("sort_key") else None,
            global_secondary_indexes=indexes or None,
            time_to_live_attribute=schema.get("ttl_attribute"),
            billing=dynamodb.Billing.on_demand(),
            encryption=dynamodb.TableEncryptionV2.aws_managed_key(),
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=deletion_protection,
            # The history is the product: keep it when the stack goes, unless protection is off.
            removal_policy=RemovalPolicy.RETAIN if deletion_protection else RemovalPolicy.DESTROY,
        )
