"""The monitor's Lambda functions: one factory holds every default (runtime, arm64, Powertools, JSON
logs with retention, X-Ray), one code asset holds what the handlers import (`infra.code_asset`), one
layer holds its dependencies.

Each function gets its own role with only the read-only AWS actions its handler uses; writes to the
monitor's own table, topic and state machine are granted by the stack, which owns those resources.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, cast

import jsii
from aws_cdk import (
    ArnFormat,
    AssetHashType,
    BundlingOptions,
    DockerImage,
    Duration,
    ILocalBundling,
    Stack,
)
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from hyperpod_nccl.monitor import lambda_timeouts as monitor_lambda_timeouts
from hyperpod_nccl.monitor.settings import LAMBDAS, TRIGGER_TIMEOUT_SECONDS, LambdaFunction, WatchedCluster
from infra import nag
from infra.code_asset import shipped_files
from infra.constants import (
    FUNCTIONS_DIR,
    LAMBDA_PIP_PLATFORM,
    LAMBDA_PYTHON_VERSION,
    POWERTOOLS_ENVIRONMENT,
    REFERENCES_DIR,
    RUNTIME_REQUIREMENTS,
    TRIGGER_FUNCTION,
)
from layers.build_layer import build as build_layer
from layers.build_layer import inputs_digest as layer_digest
from layers.bytecode import TASK_ROOT, bytecode_identity, compile_tree

# The Lambda runtime matching LAMBDA_PYTHON_VERSION (one constant drives runtime and pip platform).
RUNTIME = lambda_.Runtime(f"python{LAMBDA_PYTHON_VERSION}", lambda_.RuntimeFamily.PYTHON)
# Bundling never reaches Docker (local bundling always succeeds or raises); CDK still wants an image.
_UNUSED_IMAGE = DockerImage.from_registry(f"public.ecr.aws/sam/build-python{LAMBDA_PYTHON_VERSION}")
# HyperPod writes each cluster's logs to /aws/sagemaker/Clusters/<name>/<id>.
CLUSTER_LOG_GROUP_PATTERN = "/aws/sagemaker/Clusters/*"


def _package_files() -> Iterator[tuple[str, Path]]:
    """(asset-relative path, source) of every file the code asset ships, in a stable order: the
    handlers' import closure with its packages' data files (`infra.code_asset`), then the runbooks."""
    for path in shipped_files():
        yield path.relative_to(FUNCTIONS_DIR).as_posix(), path
    for path in sorted(REFERENCES_DIR.glob("*.md")):
        yield f"references/{path.name}", path


def package_digest() -> str:
    """The code asset's hash: every shipped file's path and content (package and references), and
    what its byte code is compiled for. The byte code itself is left out: it follows from these."""
    digest = hashlib.sha256(bytecode_identity(LAMBDA_PYTHON_VERSION).encode() + b"\0")
    for relative, path in _package_files():
        digest.update(relative.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def lay_out_code_asset(out: Path, *, python_version: str = LAMBDA_PYTHON_VERSION) -> None:
    """Copy the shipped files into `out` and compile them for `python_version` (the runtime's; the
    benchmarks compile for this machine's): /var/task is read-only in Lambda, so byte code not
    shipped would be compiled again at every cold start (`layers.bytecode`)."""
    for relative, path in _package_files():
        destination = out / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)
    compile_tree(out, python_version=python_version, runtime_root=TASK_ROOT)


@jsii.implements(ILocalBundling)
class PackageBundling:
    """Lay out the code asset: the package, with `references/` beside it so the runbook links resolve
    (`hyperpod_nccl.references.references_dir()` finds the nearest ancestor `references/`)."""

    def try_bundle(self, output_dir: str, options: Any) -> bool:
        """Lay out the code asset in the asset directory (`lay_out_code_asset`); never needs Docker."""
        lay_out_code_asset(Path(output_dir))
        return True


@jsii.implements(ILocalBundling)
class LayerBundling:
    """Lay out the dependency layer from `layers/build/python` (built by pip for the Lambda platform)."""

    def try_bundle(self, output_dir: str, options: Any) -> bool:
        """Build (or reuse) the layer and copy it into the asset directory; never needs Docker."""
        built = build_layer(python_version=LAMBDA_PYTHON_VERSION, platform=LAMBDA_PIP_PLATFORM)
        shutil.copytree(built / "python", Path(output_dir) / "python", dirs_exist_ok=True)
        return True


def _local(bundling: object) -> ILocalBundling:
    """The jsii interface type of a local bundler (jsii calls `try_bundle(output_dir, options)`
    positionally, which the generated Protocol's keyword signature does not describe)."""
    return cast(ILocalBundling, bundling)


def lambda_timeouts() -> dict[str, int]:
    """Each state machine function's Lambda timeout (seconds): its task's `TimeoutSeconds` in the
    ASL less a headroom (`hyperpod_nccl.monitor.lambda_timeouts`, which the local emulation
    enforces too), so Lambda stops a function before Step Functions gives up on its state.
    """
    return monitor_lambda_timeouts()


class ReadGrant(NamedTuple):
    """Read-only actions on resources, and why any wildcard among the resources is unavoidable.
    With `not_resources`, the actions are allowed on every resource except those (IAM NotResource)."""

    actions: tuple[str, ...]
    resources: Sequence[str]
    wildcard_reason: str
    conditions: Mapping[str, Mapping[str, str]] | None = None
    not_resources: bool = False


# StartSession: the document named in the request must be allowed explicitly (no default shell).
SESSION_DOCUMENT_CHECK = {"BoolIfExists": {"ssm:SessionDocumentAccessCheck": "true"}}


class MonitorFunctions(Construct):
    """Every function of `hyperpod_nccl.monitor.settings.LAMBDAS` as a Lambda function with the
    shared defaults, its environment and memory from its entry, and its cluster reads."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        environment_values: Mapping[str, str],
        log_retention_days: int,
        clusters: Sequence[WatchedCluster],
        probe_documents: Mapping[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        missing = sorted({name for f in LAMBDAS.values() for name in f.environment} - set(environment_values))
        if missing:
            raise ValueError(f"no value for the handlers' environment variables: {', '.join(missing)}")
        self._log_retention_days = log_retention_days
        self._clusters = list(clusters)
        self._regions = sorted({c.region for c in self._clusters}) or [Stack.of(self).region]
        self._probe_documents = dict(probe_documents)
        self.layer = lambda_.LayerVersion(
            self,
            "Dependencies",
            code=lambda_.Code.from_asset(
                str(RUNTIME_REQUIREMENTS.parent),
                asset_hash_type=AssetHashType.CUSTOM,
                asset_hash=layer_digest(
                    RUNTIME_REQUIREMENTS, python_version=LAMBDA_PYTHON_VERSION, platform=LAMBDA_PIP_PLATFORM
                ),
                bundling=BundlingOptions(image=_UNUSED_IMAGE, local=_local(LayerBundling()), command=["false"]),
            ),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[lambda_.Architecture.ARM_64],
            description="hyperpod-nccl-monitor runtime dependencies (requirements/runtime.txt)",
        )
        self.code = lambda_.Code.from_asset(
            str(FUNCTIONS_DIR),
            asset_hash_type=AssetHashType.CUSTOM,
            asset_hash=package_digest(),
            bundling=BundlingOptions(image=_UNUSED_IMAGE, local=_local(PackageBundling()), command=["false"]),
        )
        timeouts = lambda_timeouts()
        self.functions: dict[str, lambda_.Function] = {}
        self.log_groups: dict[str, logs.LogGroup] = {}
        self.roles: dict[str, iam.Role] = {}
        read_grants = self._read_grants()
        if set(read_grants) != set(LAMBDAS):
            raise ValueError(
                "the functions' read grants and settings.LAMBDAS name different functions:"
                f" {', '.join(sorted(set(read_grants) ^ set(LAMBDAS)))}"
            )
        for handler, function in LAMBDAS.items():
            environment = {name: environment_values[name] for name in function.environment}
            timeout = TRIGGER_TIMEOUT_SECONDS if handler == TRIGGER_FUNCTION else timeouts.get(handler, 60)
            self.functions[handler] = self._function(function, environment=environment, timeout_seconds=timeout)
            role = self.roles[handler]
            for grant in read_grants[handler]:
                role.add_to_policy(
                    iam.PolicyStatement(
                        actions=list(grant.actions),
                        resources=None if grant.not_resources else list(grant.resources),
                        not_resources=list(grant.resources) if grant.not_resources else None,
                        conditions=dict(grant.conditions) if grant.conditions else None,
                    )
                )
                nag.acknowledge_wildcard_resources(role, grant.resources, grant.wildcard_reason)

    def _function(
        self, function: LambdaFunction, *, environment: Mapping[str, str], timeout_seconds: int
    ) -> lambda_.Function:
        """The factory: every default of the monitor's functions lives here."""
        handler, construct_name = function.module, function.name
        log_group = logs.LogGroup(self, f"{construct_name}Logs")
        # The L2 maps retention to an enum; the config holds the number CloudWatch accepts.
        log_group.node.default_child.retention_in_days = self._log_retention_days  # type: ignore[union-attr]
        self.log_groups[handler] = log_group
        # An explicit role: the default one would attach the AWS managed AWSLambdaBasicExecutionRole,
        # which may write to every log group of the account.
        role = iam.Role(
            self,
            f"{construct_name}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"hyperpod-nccl-monitor {handler} function",
        )
        log_group.grant_write(role)
        self.roles[handler] = role
        nag.acknowledge(
            role,
            f"{nag.IAM5}[Resource::*]",
            "Active X-Ray tracing needs xray:PutTraceSegments and xray:PutTelemetryRecords, which support"
            " no resource-level permissions.",
        )
        return lambda_.Function(
            self,
            construct_name,
            description=f"hyperpod-nccl-monitor: {handler}",
            runtime=RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler=function.handler,
            code=self.code,
            layers=[self.layer],
            role=role,
            environment={**POWERTOOLS_ENVIRONMENT, **environment},
            timeout=Duration.seconds(timeout_seconds),
            memory_size=function.memory_mb,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            log_group=log_group,
            tracing=lambda_.Tracing.ACTIVE,
            # The trigger's asynchronous invocation (retries, on-failure destination) is configured
            # by the triggers construct (`infra.constructs.triggers`), with the queue it owns.
        )

    def _arns(
        self, service: str, resource: str, resource_name: str, *, sep: ArnFormat, regions: Sequence[str] | None = None
    ) -> list[str]:
        """One ARN per watched region (the functions call the clusters' regional endpoints)."""
        stack = Stack.of(self)
        return [
            stack.format_arn(
                service=service, region=region, resource=resource, resource_name=resource_name, arn_format=sep
            )
            for region in (self._regions if regions is None else regions)
        ]

    def _cluster_arns(self, regions: Sequence[str]) -> list[str]:
        """The HyperPod clusters the functions may read in `regions`: exactly the watched
        clusters when each has its `id` (its ARN is known), else every cluster of these regions
        (an empty watch list sweeps any cluster whose events arrive)."""
        slash = ArnFormat.SLASH_RESOURCE_NAME
        if self._clusters and all(c.id for c in self._clusters):
            stack = Stack.of(self)
            return [
                stack.format_arn(
                    service="sagemaker", region=c.region, resource="cluster", resource_name=str(c.id), arn_format=slash
                )
                for c in self._clusters
                if c.region in regions
            ]
        return self._arns("sagemaker", "cluster", "*", sep=slash, regions=regions)

    def _read_grants(self) -> dict[str, list[ReadGrant]]:
        """The read-only AWS actions each handler's code calls, by module, with an entry (empty when
        it reads nothing) for every function of `LAMBDAS`, which __init__ checks. Writes to our own
        resources come from the stack; tests/infra/test_probe_access.py fails on a granted action
        no code calls.

        Resources are narrowed to what is known at synth time: the account and the watched regions.
        """
        slash, colon = ArnFormat.SLASH_RESOURCE_NAME, ArnFormat.COLON_RESOURCE_NAME
        # The probe documents exist in the stack's region only (SSM documents are regional), so
        # sessions can be opened there only: a cluster of another region needs its own stack.
        stack_region = [Stack.of(self).region]
        clusters = self._cluster_arns(self._regions)
        by_cluster_id = (
            "HyperPod cluster ARNs end in the cluster id, which is assigned at creation: give every watched"
            " cluster its `id` in the config to name them; until then scoped to this account and the watched"
            " regions."
        )
        # Every SSM document of any account (AWS-owned ones have none) and region.
        any_document = Stack.of(self).format_arn(
            service="ssm", region="*", account="*", resource="document", resource_name="*", arn_format=slash
        )
        documents = [
            arn
            for name in self._probe_documents.values()
            for arn in self._arns("ssm", "document", name, sep=slash, regions=stack_region)
        ]
        return {
            "trigger": [],
            "discover": [
                ReadGrant(
                    ("sts:GetCallerIdentity", "sagemaker:ListClusters", "ec2:DescribeSecurityGroups"),
                    ["*"],
                    "sts:GetCallerIdentity, sagemaker:ListClusters and ec2:DescribeSecurityGroups are read-only"
                    " and support no resource-level permissions.",
                ),
                ReadGrant(
                    ("sagemaker:DescribeCluster", "sagemaker:ListClusterNodes", "sagemaker:ListClusterEvents"),
                    clusters,
                    by_cluster_id,
                ),
            ],
            "collect_logs": [
                ReadGrant(
                    ("logs:DescribeLogGroups",),
                    self._arns("logs", "log-group", "*", sep=colon),
                    "logs:DescribeLogGroups authorises against the account's log-group:* resource.",
                ),
                ReadGrant(
                    ("logs:DescribeLogStreams", "logs:FilterLogEvents"),
                    [
                        arn
                        for pattern in (CLUSTER_LOG_GROUP_PATTERN, f"{CLUSTER_LOG_GROUP_PATTERN}:log-stream:*")
                        for arn in self._arns("logs", "log-group", pattern, sep=colon)
                    ],
                    "HyperPod names each cluster's log group /aws/sagemaker/Clusters/<name>/<cluster id>; read"
                    " access is limited to that prefix.",
                ),
            ],
            "collect_kubernetes": [
                ReadGrant(
                    ("eks:DescribeCluster",),
                    self._arns("eks", "cluster", "*", sep=slash),
                    "The EKS cluster behind a HyperPod cluster is read from DescribeCluster at run time;"
                    " scoped to this account and the watched regions.",
                ),
            ],
            "probe_node": [
                # StartSession is authorised against its target and its document. HyperPod targets are
                # `sagemaker-cluster:<id>_<group>-<instance>`, none of the resource types the Service
                # Authorization Reference lists for StartSession (document, instance, managed-instance,
                # session): AWS's HyperPod guide grants the target on `*`. A `*` would match every
                # document too (root commands through AWS-StartInteractiveCommand), so the target is
                # granted on everything but documents, and documents only where named: the stack's own
                # probe documents (no parameters: they run the embedded probe and nothing else). The
                # document check refuses a request naming no document.
                ReadGrant(
                    ("ssm:StartSession",),
                    [any_document],
                    "NotResource: every session target (HyperPod targets have no resource type to scope"
                    " StartSession to; AWS's HyperPod IAM guide grants *) but no document.",
                    SESSION_DOCUMENT_CHECK,
                    not_resources=True,
                ),
                ReadGrant(
                    ("ssm:StartSession",),
                    documents,
                    "The stack's probe-only documents, named (ssm:SessionDocumentAccessCheck).",
                    SESSION_DOCUMENT_CHECK,
                ),
                # AWS's current Session Manager policies grant the principal that starts a session
                # ssmmessages:OpenDataChannel on its sessions: the service checks it when the probe opens
                # the data channel's websocket.
                ReadGrant(
                    ("ssmmessages:OpenDataChannel",),
                    self._arns("ssm", "session", "*", sep=slash, regions=stack_region),
                    "Session ids are generated by SSM when a probe starts its session (AWS's sample end-user policy"
                    " names session/${aws:userid}-*, whose prefix for a role's sessions is not documented): scoped"
                    " to this account's sessions in the stack's region.",
                ),
                ReadGrant(
                    ("ssm:TerminateSession",),
                    self._arns("ssm", "session", "*", sep=slash, regions=stack_region),
                    "Session ids are generated by SSM when a probe starts its session; the probe ends its own"
                    " sessions. Scoped to this account and the stack's region.",
                ),
            ],
            "aggregate": [],
            "notify": [],
        }
