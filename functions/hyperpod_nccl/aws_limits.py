"""Limits that AWS services enforce, spelled once: the product stays within them and the emulation
(`hyperpod_nccl_sim`, which imports the product, never the reverse) refuses what the service
refuses.

Our own caps and paces, chosen below these limits, are in `thresholds.py`.
"""

from __future__ import annotations

# CloudWatch Logs FilterLogEvents (the API reference and model): the longest filterPattern, the most
# logStreamNames, and one page's size ("up to 1 MB of log events or up to 10,000 log events",
# `limit` at most the latter).
FILTER_PATTERN_MAX_CHARS = 1024
FILTER_STREAM_NAMES_MAX = 100
FILTER_PAGE_MAX_EVENTS = 10_000
FILTER_PAGE_MAX_BYTES = 1_048_576
# What one event counts against a page's bytes: its UTF-8 message plus the 26 bytes PutLogEvents
# charges per event.
LOG_EVENT_OVERHEAD_BYTES = 26
