"""Numeric thresholds used by checks, each with where it comes from."""

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
