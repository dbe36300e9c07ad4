"""Secrets kept out of everything deltamark shows or stores: errors, logs, the state.

Credentials in URLs (``user:password@``, ``password=...``) are masked wherever they occur,
and so is every secret deltamark resolved in this process (connection passwords, those
in URLs) wherever it is echoed, as a JDBC driver may do in its messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["MASK", "redact", "redact_values", "remember_credentials", "remember_secret"]

MASK = "***"
_IN_URL = re.compile(r"(?i)((?:password|passwd|pwd|secret|token)=)[^&;\s'\"]*"
                     r"|(//[^/:@\s'\"]+:)[^@/\s'\"]*(@)")
_SHORTEST = 4  # shorter values are masked only in URLs: "1" would mask every digit
_secrets: set[str] = set()


def remember_secret(value: str | None) -> None:
    """Mask ``value`` from now on, wherever it is echoed."""
    if value and len(value) >= _SHORTEST:
        _secrets.add(value)


def remember_credentials(url: str) -> None:
    """Mask the credentials in ``url`` from now on, wherever they are echoed."""
    for match in _IN_URL.finditer(url):
        remember_secret(match[0].removeprefix(match[1] or match[2]).removesuffix(match[3] or ""))


def redact(text: str) -> str:
    """``text`` with credentials in URLs and every remembered secret masked."""
    text = _IN_URL.sub(lambda m: f"{m[1]}{MASK}" if m[1] else f"{m[2]}{MASK}{m[3]}", text)
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def redact_values(values: Mapping[str, str]) -> dict[str, str]:
    """A mapping (a run's arguments) with its values redacted."""
    return {key: redact(value) for key, value in values.items()}
