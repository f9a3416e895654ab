"""Subcommands of `hyperpod-nccl`, one module each (discovered by `cli.main`)."""
