"""Java's regexes, which Spark's ``rlike``, GX on Spark and Glue run, checked without a JVM.

A pattern is rewritten into Python's syntax token by token (each Java-only token into one
Python parses the same way: a class for a class, an anchor for an anchor) and compiled
with ``re``; what Java refuses and Python takes is looked for apart: Python's own groups
and comments, and a ``{`` that is not a repetition.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["java_regex_problem"]

#: Java-only tokens and their Python stand-ins, matched left to right (quoting and an
#: escaped backslash first: what follows them is no escape)
_JAVA_TOKENS: list[tuple[str, str | Callable[[str], str]]] = [
    (r"\\Q.*?(?:\\E|$)", lambda token: re.escape(token[2:].removesuffix("\\E"))),
    (r"\\\\", "\\\\"),
    (r"\\p(?:\{[^}]*\}|[A-Za-z])", "\\w"),  # Unicode and POSIX classes
    (r"\\P(?:\{[^}]*\}|[A-Za-z])", "\\W"),
    (r"\\x\{[0-9A-Fa-f]+\}|\\N\{[^}]*\}|\\c.|\\e", "\\x01"),  # characters
    (r"\\k<\w+>|\\[1-9]", "(?:)"),  # back references (Python refuses one to no group)
    (r"\(\?<(?=[A-Za-z])|\(\?[a-zA-Z-]+:", "(?:"),  # named groups, flags of a group
    (r"\(\?[a-zA-Z-]+\)", ""),  # flags, anywhere in the pattern and Java's own (d, U)
    (r"\\[hvR]", "\\s"), (r"\\[HV]", "\\S"), (r"\\X", "."), (r"\\z", "\\Z"), (r"\\G", "\\A"),
]
_JAVA = re.compile("|".join(f"({token})" for token, _ in _JAVA_TOKENS), re.S)
#: Python's own groups and comments, where no backslash escapes their parenthesis
_PYTHON_ONLY = re.compile(r"(?<!\\)(?:\\\\)*(\(\?P[<=>]|\(\?#|\(\?\()")
_REPETITION = re.compile(r"\{\d+(?:,\d*)?\}")


def java_regex_problem(pattern: str) -> str | None:
    """Why Java would refuse ``pattern``, as far as can be told without a JVM; None when
    it takes it. Java's own syntax (``\\p{L}``, ``\\Q...\\E``, ``(?<name>...)``, flags
    anywhere) is taken; Python's own (``(?P<name>...)``, ``(?#...)``, ``{,n}``) is not."""
    def stand_in(token: re.Match[str]) -> str:
        replacement = _JAVA_TOKENS[(token.lastindex or 0) - 1][1]  # a token's group
        return replacement(token[0]) if callable(replacement) else replacement

    python = _JAVA.sub(stand_in, pattern)  # quoted text escaped: no group or comment in it
    if found := _PYTHON_ONLY.search(python):
        return f"{found[1]!r} is Python's syntax, not Java's"
    where = "" if python == pattern else " (in the pattern as Python reads it)"
    if (brace := _loose_brace(python)) is not None:
        return f"'{{' at position {brace}{where} is not a repetition ({{n}}, {{n,}}, {{n,m}})"
    try:
        re.compile(python)
    except re.error as exc:  # its position is in ``python``
        return str(exc) if not where else exc.msg
    return None


def _loose_brace(pattern: str) -> int | None:
    """Where a ``{`` outside a character class does not start a repetition (Java refuses
    it; Python reads it as the character)."""
    depth, i = 0, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            depth += 1  # Java's classes nest
        elif char == "]" and depth:
            depth -= 1
        elif char == "{" and not depth and not _REPETITION.match(pattern, i):
            return i
        i += 1
    return None
