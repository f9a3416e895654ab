"""Errors that stop a diagnosis before it can report (everything else degrades a source)."""

from __future__ import annotations


class DiagnosisAborted(Exception):
    """A prerequisite is missing or the cluster cannot be reached (CLI exit code 1)."""

    def __init__(self, message: str, *, fix: str, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.details = details or []


class CredentialsError(DiagnosisAborted):
    """STS GetCallerIdentity failed: nothing else can work."""


class ClusterNotFound(DiagnosisAborted):
    """DescribeCluster says the cluster does not exist; `details` lists those that do."""


class ScopeMatchesNothing(DiagnosisAborted):
    """The operator's scope names nothing in the cluster (`--node` with an instance id that
    ListClusterNodes does not list): a usage error, CLI exit code 2, with the message alone."""
