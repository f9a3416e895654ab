"""Constructs of the monitor stack, one per capability."""
