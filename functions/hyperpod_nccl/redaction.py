"""What counts as a secret, decided in one place: collectors redact at collection time, and
everything that prints, stores or sends text (reports, support bundles, notifications) goes
through the same rules."""

from __future__ import annotations

import logging
import re
from typing import Any

REDACTED = "<redacted>"
# Names of environment variables / ConfigMap keys whose values must never be shown.
_SECRET_NAME = re.compile(r"(?i)(secret|passw|token|api_?key|access_?key|private_?key|credential|auth|session)")
# Values that look like credentials even under an innocent name: AWS access key ids, EKS
# bearer tokens and long opaque strings (SSM TokenValues, session tokens, signatures).
SECRET_VALUE = re.compile(r"(AKIA|ASIA)[0-9A-Z]{16}|k8s-aws-v1\.[A-Za-z0-9_-]+|[A-Za-z0-9+/=_-]{40,}")


def is_secret_name(name: str) -> bool:
    """Whether an environment variable or ConfigMap key name suggests a secret value."""
    return bool(_SECRET_NAME.search(name))


def redact_value(name: str, value: str) -> str:
    """`value` as it may be shown: REDACTED when its name or its shape looks secret."""
    if is_secret_name(name) or SECRET_VALUE.search(value):
        return REDACTED
    return value


def scrub(text: str) -> str:
    """Replace every secret-shaped token inside free text (log lines, error messages)."""
    return SECRET_VALUE.sub(REDACTED, text)


_scrubber_installed = False


def install_log_scrubber() -> None:
    """Scrub secret-shaped tokens from every log record created from now on, whoever logs it.

    botocore at DEBUG logs response bodies (StartSession's TokenValue among them); a record
    factory catches those too, which a filter on our own loggers would not. Idempotent.
    """
    global _scrubber_installed
    if _scrubber_installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed format string: leave it to the handler
            return record
        if SECRET_VALUE.search(message):
            record.msg, record.args = scrub(message), None
        return record

    logging.setLogRecordFactory(factory)
    _scrubber_installed = True
