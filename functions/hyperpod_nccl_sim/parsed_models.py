"""botocore's data files (service models, endpoints, partitions, retry rules) parsed once per
process and shared by every botocore session it makes.

Each `botocore.session.Session` builds its own loader, which parses the JSON data files again:
EC2's model alone is megabytes, and a client for each of the nine services the handlers use costs
about 1.4 s of CPU from cold against 0.2 s with the parsed files at hand. The emulation's own
clients use `shared_loader()`, and `share_with_every_session()` makes every other session take it
too: the emulation calls it when it starts (the CLI run in-process by the tests and the demo), and
the Lambda sandboxes' fork server at its preload (`sandboxes.PRELOADED`), so that every sandbox it
forks finds the models of `SANDBOX_SERVICES` already parsed.

What that changes, and what it does not: the files are read-only data every sandbox would parse
identically, so no behaviour depends on them being shared (no state written by one invocation is
seen by another); only a sandbox's first client is cheaper than on Lambda, where the init phase
pays the parse. That cost is measured where it matters, by the cold-start benchmark
(tests/bench/bench_cold_start.py, fresh interpreters); the functional tests and the sweep benchmark
do not time cold starts.
"""

from __future__ import annotations

import threading
from typing import Any

import botocore.loaders
import botocore.session

from hyperpod_nccl.collectors.aws import shared_model_loader

# Every service whose client a handler creates (the collectors' reads, the monitor's own table,
# topic, queue and state machine).
SANDBOX_SERVICES = (
    "dynamodb",
    "ec2",
    "eks",
    "logs",
    "sagemaker",
    "sns",
    "sqs",
    "ssm",
    "stepfunctions",
    "sts",
)

_share_lock = threading.Lock()
_shared = False


def shared_loader() -> Any:
    """The process's one botocore loader: the product's own (`collectors.aws.shared_model_loader`,
    which every session the product makes already uses), so the emulation and the sessions made
    elsewhere share its cache too."""
    return shared_model_loader()


def _loader_for(search_path_string: str | None = None) -> Any:
    # A session told of other data paths (AWS_DATA_PATH) gets a loader of its own, as botocore gives it.
    if search_path_string:
        return botocore.loaders.create_loader(search_path_string)
    return shared_loader()


def share_with_every_session() -> None:
    """Make every botocore session of this process use `shared_loader()` and parse the data files of
    `SANDBOX_SERVICES` now, so that processes forked from this one inherit them parsed (once per
    process; later calls do nothing)."""
    global _shared
    with _share_lock:
        if _shared:
            return
        _shared = True
    botocore.session.create_loader = _loader_for
    session = botocore.session.Session()
    for service in SANDBOX_SERVICES:
        # A client needs the service model, the endpoint rules, the partitions and the retry rules.
        session.create_client(
            service,
            region_name="us-west-2",
            endpoint_url="http://127.0.0.1:9",
            aws_access_key_id="warm",
            aws_secret_access_key="warm",
        )
