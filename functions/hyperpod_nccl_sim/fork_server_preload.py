"""Imported by the Lambda sandboxes' fork server (`sandboxes.PRELOADED`): importing it shares one
parsed copy of botocore's data files with every session of the fork server and of the sandboxes it
forks (`parsed_models`). The import is the whole effect: a preload can only name modules."""

from hyperpod_nccl_sim.parsed_models import share_with_every_session

share_with_every_session()
