"""The states of the sweep state machine, one module each, named like its handler.

Flow (monitor/sweep.asl.json): Discover -> Collect (CloudWatch scan | Kubernetes | Map of one
state per node) -> Aggregate -> Notify (only on change) -> FollowUp (folded triggers).
Collector outputs live in the table under the sweep's partition; the state carries only ids
(`monitor.payloads`). Handlers parse their input and call exactly one function of these modules
(or `monitor.lock.start_sweep`, the trigger).
"""
