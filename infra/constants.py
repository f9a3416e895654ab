"""Fixed names of the monitor's infrastructure: construct ids, output ids, paths and the Lambda platform.

Environment-variable names, the table of Lambda functions (`LAMBDAS`: each one's environment, table
actions, memory and ASL placeholder), the table schema and the sweep's time budgets are NOT here: they
belong to the runtime (`hyperpod_nccl.monitor.settings`), which infra imports so both sides read one
definition.
"""

from __future__ import annotations

from pathlib import Path

from hyperpod_nccl.handlers import SERVICE
from hyperpod_nccl.monitor.settings import (
    METRICS_NAMESPACE,
    STACK_OUTPUT_TABLE,
    STACK_OUTPUT_TRIGGER_FUNCTION,
    STACK_OUTPUT_WATCHED_CLUSTERS,
)
from hyperpod_nccl.probe.documents import DEFAULT_STACK_NAME

# --- repository layout (the app runs from anywhere; paths are anchored on this file) -------------
REPO_ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS_DIR = REPO_ROOT / "functions"
PACKAGE_NAME = "hyperpod_nccl"
REFERENCES_DIR = REPO_ROOT / "references"
RUNTIME_REQUIREMENTS = REPO_ROOT / "requirements" / "runtime.txt"
LAYERS_DIR = REPO_ROOT / "layers"
DEFAULT_OUTDIR = REPO_ROOT / "cdk.out"
CDK_JSON = REPO_ROOT / "cdk.json"
# The cluster name the shipped cdk.json watches until it is edited: synth refuses to deploy it.
PLACEHOLDER_CLUSTER = "my-hyperpod-cluster"

# --- Lambda platform: one place, used by the functions AND by the layer's pip --platform ------------
# The newest Python runtime Lambda offers (cdk-nag AwsSolutions-L1 asks for the latest of the family);
# every pinned runtime dependency publishes cp314 manylinux2014_aarch64 wheels.
LAMBDA_PYTHON_VERSION = "3.14"
LAMBDA_PIP_PLATFORM = "manylinux2014_aarch64"

# Powertools reads these from the function environment (set for every function by the factory);
# the values are the runtime's, so the dashboard graphs exactly what the handlers emit.
POWERTOOLS_SERVICE_NAME = SERVICE
POWERTOOLS_ENVIRONMENT: dict[str, str] = {
    "POWERTOOLS_SERVICE_NAME": SERVICE,
    "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
    "POWERTOOLS_LOG_LEVEL": "INFO",
}

# --- Dummy environment for offline synthesis (no AWS account, no lookups) -------------------------
OFFLINE_ACCOUNT = "123456789012"
OFFLINE_REGION = "us-west-2"

# --- Construct ids (PascalCase nouns) and CfnOutput logical ids (fixed; tests and scripts read them) -
# The CLI looks for the probe documents of a stack of this name, so the runtime owns the default.
STACK_ID_DEFAULT = DEFAULT_STACK_NAME
OUTPUT_TABLE_NAME = STACK_OUTPUT_TABLE
OUTPUT_TOPIC_ARN = "AlertsTopicArn"
OUTPUT_STATE_MACHINE_ARN = "SweepStateMachineArn"
OUTPUT_TRIGGER_FUNCTION = STACK_OUTPUT_TRIGGER_FUNCTION
OUTPUT_WATCHED_CLUSTERS = STACK_OUTPUT_WATCHED_CLUSTERS
OUTPUT_KUBERNETES_ROLE_ARN = "KubernetesCollectorRoleArn"
OUTPUT_DASHBOARD = "DashboardName"
# The probe-only Session documents, by probe role.
OUTPUT_PROBE_DOCUMENTS = {"node": "NodeProbeDocumentName", "slurm_controller": "SlurmControllerProbeDocumentName"}

# The trigger is the only function outside the state machine: schedules and EventBridge rules call it.
TRIGGER_FUNCTION = "trigger"

# Step Functions vended-log groups must live under this prefix to keep the account's log resource
# policy small (one policy covers every state machine).
STATE_MACHINE_LOG_PREFIX = "/aws/vendedlogs/states/"

# --- Alarms -----------------------------------------------------------------------------------------
# CloudWatch alarms evaluate at most one day per period.
MAX_ALARM_PERIOD_SECONDS = 24 * 3600
