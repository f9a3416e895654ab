"""The `hyperpod-nccl` command line: a thin shell over the engine."""
