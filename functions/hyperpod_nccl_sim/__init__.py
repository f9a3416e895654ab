"""The embedded simulated HyperPod cluster: scenario files, an AWS emulation (moto on
loopback, extended where moto lacks HyperPod operations), and the node/Kubernetes emulators.

A sibling of `hyperpod_nccl`, not part of it: the product never imports it (only the CLI's
`demo` and `bench` commands do, inside the commands), and the Lambda asset does not hold it. The
simulation sits behind the same endpoints and URLs that real AWS hands out, so `diagnose` runs
unchanged against it. `scenario` (and `node_behaviours`) describe a scenario file with pydantic
alone; the emulators import them, never the reverse.
"""
