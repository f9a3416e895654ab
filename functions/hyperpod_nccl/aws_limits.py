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
# FilterLogEvents' rate: 5 transactions per second per account and Region, a hard limit that no
# increase request changes (AWS knowledge center, "How do I determine throttling in my CloudWatch
# logs?", repost.aws/knowledge-center/cloudwatch-logs-throttling). Past it the call answers
# ThrottlingException ("Rate exceeded").
FILTER_LOG_EVENTS_PER_SECOND = 5

# Step Functions (service quotas, "Maximum input or output size for a task, state, or execution";
# the API reference's StateEnteredEventDetails.input: "Maximum length of 262144", bytes of UTF-8): a
# state's input or output, or a task's result, past this fails the execution with
# States.DataLimitExceeded, which no Catch on States.ALL catches.
STATE_PAYLOAD_MAX_BYTES = 262_144
# The longest an Express execution (each child of the probe Map) runs before Step Functions stops it.
EXPRESS_EXECUTION_MAX_SECONDS = 300
# The longest Cause a Step Functions failure carries (TaskFailedEventDetails.cause, API reference): what
# a Catch's ResultPath adds to the state at most, besides the Error name (at most 256 characters).
FAILURE_CAUSE_MAX_CHARS = 32_768
FAILURE_ERROR_MAX_CHARS = 256
