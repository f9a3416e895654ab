"""Our numeric thresholds, caps and paces (checks, collectors, the SSM client, hang attribution),
each with where it comes from. Limits an AWS API enforces are in `aws_limits.py`."""

from __future__ import annotations

# cluster-debugger.md § 4: PyTorch's 10-minute default collective timeout and the memlock
# topology-search field observation start to bite at this size.
LARGE_CLUSTER_NODES = 256
# The collective-timeout heuristic of performance-testing.md § 6: nodes * 5 s + 600 s.
TIMEOUT_SECONDS_PER_NODE = 5
TIMEOUT_BASE_SECONDS = 600
# Fixed memlock (KiB) that replaced "unlimited" in the large-cluster field observation.
LARGE_CLUSTER_MEMLOCK_KIB = 8388608
# Default look-back window of CloudWatch and events (skill.md: the last 2 hours).
DEFAULT_WINDOW_SECONDS = 7200
# Hardware sample defaults of the original tool (skill.md): 3 nodes, capped at 50 unless "all".
DEFAULT_SAMPLE_NODES = 3
MAX_SAMPLE_NODES = 50
# Per-node SSM budget, connection included (skill.md).
SSM_NODE_BUDGET_SECONDS = 180
# What one SSM session may hold of a node's answer (ssm/client.py); a node past any of these is
# broken or hostile, and its session alone fails (kind limit_exceeded), keeping what it sent.
# Output: one Flight Recorder dump at its cap, base64-encoded (4/3), plus the RAS status fit.
SSM_SESSION_MAX_OUTPUT_BYTES = 64 << 20
# Messages held while an earlier one is missing: the session-manager-plugin's own incoming buffer
# holds 10,000 (of at most 1 KiB of output each, the agent's chunk size).
SSM_OUT_OF_ORDER_MAX_MESSAGES = 10_000
SSM_OUT_OF_ORDER_MAX_BYTES = 16 << 20
# Session Manager StartSession rate per account (AWS-published hyperpod-ssm skill: 3 TPS).
SSM_START_SESSION_PER_SECOND = 3.0
# The probe time a sweep sizes its probes at once for before it has measured one (the monitor's
# first sweep of a cluster, the CLI until its first probes end): the slow probe of issue 15's
# targets (20 s: a busy 8-GPU node's nvidia-smi, dmesg and fabric reads; the fast one is 2 s).
# Guessing long costs the monitor's first sweep billed waiting for the rate; guessing short would
# make a sweep slower than the rate allows. Infra's nodes x cadence check at synth uses it as the
# "one probe" a sweep ends with.
EXPECTED_PROBE_SECONDS = 20.0
# Parallel node probes of one CLI sweep: as many as keep the StartSession pace busy (rate x probe
# time, Little's law, as the monitor sizes its probe Map), for EXPECTED_PROBE_SECONDS until probes
# end, then for their p90 session time, never fewer than this: 20 s probes at 3/s need 60, and a
# fixed 16 made a 1,024-node diagnose take 22 minutes instead of 6 (BENCHMARKS.md's sweep section).
# At most SSM_PROBE_WORKERS_MAX, and at most what SSM_PROBE_MEMORY_SHARE of the machine's memory
# holds at the worst a session may hold (SSM_SESSION_MAX_OUTPUT_BYTES, a Flight Recorder dump): 16
# at once is 1 GiB at worst. A probe waiting for its start holds no output, so in flight the pool
# holds about rate x probe time sessions, whatever its size.
SSM_PROBE_WORKERS = 16
SSM_PROBE_WORKERS_MAX = 64
SSM_PROBE_MEMORY_SHARE = 0.25

# Kubernetes (EKS) collection and checks.
# Items per list page: large enough that most clusters answer in one page, small enough to keep
# one answer far below the API server's response limits.
K8S_PAGE_SIZE = 500
# Log lines read per training container (the original's `kubectl logs --tail=500`).
K8S_LOG_TAIL_LINES = 500
# Training pods whose logs one sweep reads (bounds the API calls of very large jobs).
K8S_LOG_MAX_PODS = 64
# Bytes read per container log (`limitBytes`, and a hard cap on what the client reads from the
# socket, for a server that ignores it): 500 lines of about 1 KiB. A job printing longer lines is
# cut here and the log says it was truncated.
K8S_LOG_MAX_BYTES = 512 * 1024
# Restarts above this count are reported (the original's `restartCount > 2`).
K8S_POD_RESTARTS_WARN = 2
# /dev/shm below this size starves NCCL's shared-memory transport and dataloader workers; the
# runbooks recommend 10Gi (debugging-guide.md § 17; Docker's default is only 64Mi).
DEV_SHM_MIN_BYTES = 1 << 30
DEV_SHM_RECOMMENDED = "10Gi"

# CloudWatch scan (collectors/logs.py): events read per FilterLogEvents query before it counts as
# overflowing, and page size. The cap bounds memory and time on a noisy group.
LOG_EVENTS_PER_TERM = 5000
LOG_FILTER_PAGE_LIMIT = 1000
# A stream with this many events of one overflowing query is a flooding stream (any job can print
# a line carrying every term): the other streams are read again without it, and it is read from
# its newest end and for the terms its flood lacks, each read capped at this many events.
LOG_EVENTS_PER_STREAM = 1000
# A term in at least this share of a flooding stream's events is part of its flood.
LOG_FLOOD_TERM_SHARE = 0.1
# FilterLogEvents calls of one scan (2 on a quiet group); past it the scan says it is incomplete.
LOG_FILTER_MAX_CALLS = 100
# FilterLogEvents' quota is 5 requests per second per account and Region, not adjustable (AWS
# knowledge center, "cloudwatch-logs-throttling"); the scan paces itself at 4 to leave room for
# the people and tools of the same account.
LOG_FILTER_CALLS_PER_SECOND = 4.0

# Hang attribution (hang/): caps on what one node hands back and what one parse accepts.
# A Flight Recorder dump of 2000 entries with stacks is a few MiB; anything far larger is not a
# dump we understand (or is hostile), so it is refused rather than loaded.
FLIGHT_RECORDER_MAX_BYTES = 32 << 20
# Dumps one node hands back, newest first: a node runs at most 8 local ranks of a job, and a
# prefix on a shared file system may name every rank of it (node_probe.sh reads no more).
FLIGHT_RECORDER_MAX_FILES = 16
# Containers (dicts, lists, tuples) and scalars one dump may hold before it is refused, counted
# as visited (a container the pickle memo shares is counted each time it is reached, as every
# later walk of the data would pay for it).
FLIGHT_RECORDER_MAX_OBJECTS = 5_000_000
# Nesting of containers: a real dump is 5 deep (dump → entries → entry → frames → frame). Deeper
# data is refused before anything recursive (pydantic, repr, json.dumps) ever walks it: a 5 KB
# pickle of nested lists otherwise ends in RecursionError far from the loader.
FLIGHT_RECORDER_MAX_DEPTH = 16
# NCCL RAS status text/JSON of one query (a 4096-rank job's verbose JSON is a few MiB).
RAS_STATUS_MAX_BYTES = 16 << 20
# Nesting accepted in JSON the cluster sends (RAS status, DCGM health, annotations): real answers
# are under 10 deep; far deeper input is refused before it reaches recursive code (bounded.py).
UNTRUSTED_JSON_MAX_DEPTH = 32
# `dcgmi health --check -j` of one node: a few KiB for 8 GPUs.
DCGM_HEALTH_MAX_BYTES = 1 << 20
# Kubernetes caps all annotations of one object together at 256 KiB (TotalAnnotationSizeLimitB).
K8S_ANNOTATIONS_MAX_BYTES = 256 * 1024
# Pod/node lines printed for one incident's affected set before "… and N more".
INCIDENT_LIST_LIMIT = 10
# A hardware fault and a job failure this close together are treated as cause and effect.
INCIDENT_CAUSAL_WINDOW_SECONDS = 3600
# On-node probe limits (original Check 8, debugging-guide § 17): memlock and stack in KiB.
NODE_MIN_MEMLOCK_KIB = 8388608
NODE_MIN_STACK_KIB = 4096
# Open files (RLIMIT_NOFILE soft) of the job's processes. Each NCCL rank holds sockets per peer for
# bootstrap and the proxy, plus EFA/verbs and CUDA IPC descriptors, so the kernel's default soft
# limit of 1024 is a known cause of "Too many open files" in multi-node NCCL/PyTorch jobs (NCCL
# raises its soft limit to the hard one only in the bootstrap root's process). 65536 is the
# soft limit the EKS AL2023 AMI and Bottlerocket give every container (awslabs/amazon-eks-ami PR
# #1794, RLIMIT_NOFILE 65536:1048576); a containerd at 1024:524288 (PR #1535) was reverted after
# "Too many open files" in production. At or below the default it fails, below the floor it warns.
NODE_MIN_OPEN_FILES = 65536
NODE_DEFAULT_OPEN_FILES = 1024
# Node clock skew (s) outside the probe's session: a warning past a few heartbeats' worth, a failure
# past munge's default credential time-to-live (5 minutes), beyond which Slurm rejects the node.
NODE_CLOCK_SKEW_WARN_SECONDS = 30
NODE_CLOCK_SKEW_FAIL_SECONDS = 300
NODE_MIN_SHM_BYTES = 2**30
NODE_RECOMMENDED_SHM_BYTES = 4 * 2**30
# NCCL 2.20 and newer need at least this driver major version.
NCCL_2_20_MIN_DRIVER_MAJOR = 525
# EFA error-counter outliers within an instance group (robust z = 0.6745 * (x - median) / MAD).
EFA_COUNTER_OUTLIER_Z = 3.5
EFA_COUNTER_MIN_EXCESS = 100
# Loopback fi_pingpong on one node (original probe 34). The original warned above 20 µs
# ("normal 1-5 µs"), but public loopback runs of the EFA installer's efa_test.sh show 8-24 µs
# (tests/data/probe/README.md), so a fixed 20 µs would flag healthy nodes. A node warns when it
# is slow in absolute terms (performance-testing.md § 4 calls > 50 µs a straggler) or an outlier
# in its instance group (> 2x the group's median, above 20 µs, with >= 3 nodes measured); either
# way the WARN asks for the pairwise test before anything is drained.
EFA_LOOPBACK_LATENCY_WARN_USEC = 50.0
EFA_LOOPBACK_LATENCY_FLOOR_USEC = 20.0
EFA_LOOPBACK_OUTLIER_FACTOR = 2.0
EFA_LOOPBACK_MIN_GROUP = 3
