"""One node's state of the Map: probe the node over SSM within its budget, store the result."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from hyperpod_nccl.handlers import collector_clients, connect_store, naming_aws_failures, powertools
from hyperpod_nccl.monitor.payloads import ProbeItem
from hyperpod_nccl.monitor.settings import MonitorSettings
from hyperpod_nccl.monitor.shared_pacer import AccountPace
from hyperpod_nccl.monitor.states.probe_node import run_probe_node

logger, tracer, metrics = powertools("probe_node")


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Probe the node of one Map item."""
    settings = MonitorSettings.from_env()
    item = ProbeItem.model_validate(event)
    logger.append_keys(sweep_id=item.sweep_id, instance_id=item.instance_id)
    store = connect_store(settings)
    with naming_aws_failures("probe_node", store.table.meta.client):
        output = run_probe_node(
            item,
            store,
            collector_clients(settings, item.region),
            settings.node_coverage,
            settings.probe_documents,
            AccountPace.of(settings),
        )
    logger.info("probed", extra={"reachable": output.reachable})
    return output.model_dump(mode="json")
