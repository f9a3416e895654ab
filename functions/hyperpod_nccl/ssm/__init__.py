"""Our own Session Manager client: the data-channel codec and a non-interactive command runner.

A Lambda has no session-manager-plugin binary, so the tool speaks the protocol itself
(see the spec in ssm-protocol.md); the simulated agent shares the codec under test.
"""
