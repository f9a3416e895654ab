"""The embedded simulated HyperPod cluster: scenario files, an AWS emulation (moto on
loopback, extended where moto lacks HyperPod operations), and the node/Kubernetes emulators.

Product code never imports this package: the simulation sits behind the same endpoints and
URLs that real AWS hands out, so `diagnose` runs unchanged against it.
"""
