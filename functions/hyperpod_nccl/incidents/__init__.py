"""Incidents: a sweep's HyperPod events, health-agent detections, node faults, log findings and
hang attribution joined into one story per root cause (timeline, affected nodes/pods/ranks,
recurrence), plus the AWS Support escalation rules that apply to them."""
