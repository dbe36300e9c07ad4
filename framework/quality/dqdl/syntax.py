"""DQDL's syntax: a ruleset's text as rule nodes, before any meaning is given to them
(``ruleset`` does that).

    Metadata = { "Version": "1.0" }
    allowed = ["new", "paid"]
    Rules = [
        RowCount between (0.9 * avg(last(10))) and (1.1 * avg(last(10))),
        ColumnValues "status" in $allowed where "amount > 0" with threshold > 0.9,
        (IsComplete "id") and (Completeness of email > 0.9) labels=["team"="crm"]
    ]
    Analyzers = [ RowCount ]

Values in comparisons stay expressions (``Expression``) until the builder evaluates them:
numbers, ``last(k)`` and its aggregates, ``now()``, durations (``3 days``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Composite", "Condition", "DqdlError", "Expression", "Keyword", "Simple",
           "parse_nodes"]


class DqdlError(ValueError):
    """A ruleset deltamark cannot evaluate: says which rule and why."""


@dataclass(frozen=True)
class Keyword:
    """DQDL's NULL, EMPTY or WHITESPACES_ONLY in a comparison."""

    name: str


@dataclass(frozen=True)
class Expression:
    """A value to compute: ``("number", 3)``, ``("call", "avg", (args))``, ``("op", "*", a,
    b)``, ``("negate", a)``, ``("now",)``, ``("duration", a, "hours")``, ``("size", a, "MB")``."""

    tree: tuple[Any, ...]
    text: str

    @property
    def dynamic(self) -> bool:
        """Whether it reads earlier runs (``last(k)``)."""
        def walk(node: Any) -> bool:
            if isinstance(node, tuple):
                return node[:2] == ("call", "last") or any(walk(n) for n in node)
            return False
        return walk(self.tree)


Value = Any  # a str, a Keyword, an Expression, or a list of them (a $constant)


@dataclass(frozen=True)
class Condition:
    """``operator``: > >= < <= = != between, not between, in, not in, matches, not matches."""

    operator: str
    values: tuple[Value, ...]


@dataclass(frozen=True)
class Simple:
    text: str
    kind: str
    arguments: tuple[str, ...]
    condition: Condition | None
    threshold: Condition | None = None
    where: str | None = None
    tags: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Composite:
    text: str
    operator: str  # and, or
    parts: tuple[Simple | Composite, ...]


Node = Simple | Composite


@dataclass(frozen=True)
class Nodes:
    """A ruleset's rules, and whether it had an ``Analyzers`` section."""

    rules: tuple[Node, ...]
    analyzers: bool


_TOKEN = re.compile(r"""\s*(?:
    (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<number>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
  | (?P<variable>\$[A-Za-z_][A-Za-z0-9_]*)
  | (?P<symbol>>=|<=|!=|->|[=<>\[\](){},:+\-*/])
  | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
)""", re.VERBOSE)

#: words that end a rule's parameters
_RESERVED = {"between", "in", "not", "matches", "with", "where", "labels", "and", "or", "of"}
_KEYWORDS = {"null": "NULL", "empty": "EMPTY", "whitespaces_only": "WHITESPACES_ONLY"}
_UNITS = {"days", "hours", "minutes", "b", "kb", "mb", "gb", "tb"}


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    start: int
    end: int

    @property
    def value(self) -> Any:
        if self.kind == "string":
            return re.sub(r'\\(["\\])', r"\1", self.text[1:-1])
        return self.text


def parse_nodes(text: str) -> Nodes:
    """The rule nodes of a DQDL ruleset's text.

    Raises:
        DqdlError: a syntax error, naming where.
    """
    parser = _Parser(text)
    rules: list[Node] | None = None
    analyzers = False
    while not parser.at_end():
        name = parser.peek()
        after = parser.peek(1)
        if name is None or name.kind != "word" or after is None or after.text != "=":
            if rules is not None:
                raise DqdlError(f"after the rules: unexpected {parser.peek_text()!r}")
            parser.expect("Rules")
        assert name is not None
        parser.at += 2
        if name.text == "Rules":
            parser.expect("[")
            rules = [parser.rule()]
            while parser.accept(","):
                rules.append(parser.rule())
            parser.expect("]")
        elif name.text == "Analyzers":
            parser.skip_block("[", "]")
            analyzers = True
        elif name.text in ("Metadata", "DataSources"):
            parser.skip_block("{", "}")
        elif name.text == "DefaultLabels":
            parser.skip_block("[", "]")
        elif rules is None:
            parser.constants[name.text] = parser.constant()
        else:
            raise DqdlError(f"after the rules: unexpected {name.text!r}")
        parser.accept(",")
    if rules is None:
        if analyzers:
            return Nodes((), True)
        raise DqdlError(f"expected 'Rules', found {parser.peek_text()!r}")
    return Nodes(tuple(rules), analyzers)


class _Tokens:
    """A ruleset's text as tokens, read from the front (``at``)."""

    def __init__(self, text: str):
        self.text, self.tokens, position = text, [], 0
        while position < len(text):
            found = _TOKEN.match(text, position)
            if not found or found.end() == position:
                rest = text[position:].strip()
                if not rest:
                    break
                raise DqdlError(f"cannot read {rest[:30]!r} (at character {position})")
            position = found.end()
            kind = found.lastgroup
            assert kind is not None  # every alternative of _TOKEN is a named group
            if kind != "comment":
                self.tokens.append(_Token(kind, found.group(kind), found.start(kind),
                                          found.end(kind)))
        self.at = 0

    def at_end(self) -> bool:
        return self.at >= len(self.tokens)

    def peek(self, ahead: int = 0) -> _Token | None:
        at = self.at + ahead
        return self.tokens[at] if at < len(self.tokens) else None

    def peek_text(self) -> str:
        token = self.peek()
        return "the end" if token is None else token.text

    def accept(self, text: str) -> _Token | None:
        token = self.peek()
        if token is not None and token.kind in ("symbol", "word") and (
                token.text.lower() == text.lower()):
            self.at += 1
            return token
        return None

    def expect(self, text: str) -> _Token:
        token = self.accept(text)
        if token is None:
            raise DqdlError(f"expected {text!r}, found {self.peek_text()!r}")
        return token

    def skip_block(self, opening: str, closing: str) -> None:
        """Read past a bracketed block (``[...]``, ``{...}``), the opening one next."""
        self.expect(opening)
        depth = 1
        while depth:
            if self.at_end():
                raise DqdlError(f"{opening}...{closing}: the block is not closed")
            depth += {opening: 1, closing: -1}.get(self.tokens[self.at].text, 0)
            self.at += 1

    def since(self, start: _Token | None) -> str:
        """The source text from ``start`` to the last token read, whitespace collapsed."""
        first = start.start if start else 0
        last = self.tokens[self.at - 1].end if self.at else first
        return " ".join(self.text[first:last].split())


class _Parser(_Tokens):
    """DQDL's grammar, read from the tokens."""

    def __init__(self, text: str):
        super().__init__(text)
        self.constants: dict[str, Any] = {}

    def constant(self) -> Any:
        """A constant's value: a quoted string, or a list of values."""
        if self.accept("["):
            values = [self.value()]
            while self.accept(","):
                values.append(self.value())
            self.expect("]")
            return values
        token = self.peek()
        if token is None or token.kind != "string":
            raise DqdlError(f"a constant is a quoted string or a [list], not "
                            f"{self.peek_text()!r}")
        self.at += 1
        return token.value

    # --- rules ------------------------------------------------------------------------

    def rule(self) -> Node:
        start = self.peek()
        if start is not None and start.text == "(":
            self.at += 1
            parts, operators = [self._closed()], []
            while (token := self.accept("and") or self.accept("or")) is not None:
                operators.append(token.text.lower())
                self.expect("(")
                parts.append(self._closed())
            self._skip_labels()
            if not operators:
                return parts[0]
            return self._grouped(start, parts, operators)
        return self._simple()

    def _grouped(self, start: _Token, parts: list[Node], operators: list[str]) -> Node:
        """``parts`` joined by ``operators``, ``and`` binding tighter than ``or``."""
        groups: list[list[Node]] = [[parts[0]]]
        for operator, part in zip(operators, parts[1:], strict=True):
            if operator == "and":
                groups[-1].append(part)
            else:
                groups.append([part])
        text = self.since(start)
        joined = [g[0] if len(g) == 1 else Composite(
            " and ".join(f"({p.text})" for p in g), "and", tuple(g)) for g in groups]
        return joined[0] if len(joined) == 1 else Composite(text, "or", tuple(joined))

    def _closed(self) -> Node:
        """A rule in parentheses, the '(' already read."""
        inner = self.rule()
        self.expect(")")
        return inner

    def _simple(self) -> Simple:
        start = self.peek()
        if start is None or start.kind != "word":
            raise DqdlError(f"expected a rule, found {self.peek_text()!r}")
        self.at += 1
        arguments: list[str] = []
        while True:
            connector = self.peek()
            if connector is not None and connector.kind == "word" and \
                    connector.text.lower() in ("of", "and") and self._is_parameter(1):
                self.at += 1
            if not self._is_parameter(0):
                break
            token = self.tokens[self.at]
            self.at += 1
            arguments.append(self._constant(token) if token.kind == "variable"
                             else token.value)
        condition = self._condition()
        where = threshold = None
        tags: dict[str, Any] = {}
        while True:
            if self.accept("where"):
                clause = self.peek()
                if clause is None or clause.kind != "string" or not clause.value.strip():
                    raise DqdlError(f"{self.since(start)}: where takes a quoted Spark SQL "
                                    "condition, e.g. where \"amount > 0\"")
                self.at += 1
                where = clause.value
            elif self.accept("with"):
                if self.accept("threshold"):
                    threshold = self._condition()
                    if threshold is None:
                        raise DqdlError(f"{self.since(start)}: 'with threshold' takes a "
                                        "comparison such as '> 0.9'")
                else:
                    name = self.peek()
                    if name is None or name.kind != "word":
                        raise DqdlError(f"{self.since(start)}: 'with' takes threshold or a "
                                        "tag (with timeZone = \"UTC\")")
                    self.at += 1
                    self.expect("=")
                    tags[name.text] = self.value()
            elif not self._skip_labels():
                break
        return Simple(self.since(start), start.text, tuple(arguments), condition,
                      threshold, where, tags)

    def _is_parameter(self, ahead: int) -> bool:
        token = self.peek(ahead)
        if token is None:
            return False
        if token.kind in ("string", "variable"):
            return True
        return token.kind == "word" and token.text.lower() not in _RESERVED and (
            token.text.lower() not in _KEYWORDS)

    def _skip_labels(self) -> bool:
        if self.accept("labels"):
            self.expect("=")
            self.skip_block("[", "]")
            return True
        return False

    def _constant(self, token: _Token) -> Any:
        name = token.text[1:]
        if name not in self.constants:
            raise DqdlError(f"${name}: no such constant (declare it before the rules: "
                            f'{name} = "...")')
        return self.constants[name]

    def _condition(self) -> Condition | None:
        negated = bool(self.accept("not"))
        for operator in (">=", "<=", "!=", ">", "<", "="):
            if not negated and self.accept(operator):
                return Condition(operator, (self.value(),))
        prefix = "not " if negated else ""
        if self.accept("between"):
            low = self.value()
            self.expect("and")
            return Condition(prefix + "between", (low, self.value()))
        if self.accept("in"):
            if (token := self.peek()) is not None and token.kind == "variable":
                self.at += 1
                values = self._constant(token)
                return Condition(prefix + "in", tuple(values if isinstance(values, list)
                                                      else [values]))
            self.expect("[")
            found = [self.value()]
            while self.accept(","):
                found.append(self.value())
            self.expect("]")
            return Condition(prefix + "in", tuple(found))
        if self.accept("matches"):
            return Condition(prefix + "matches", (self.value(),))
        if negated:
            raise DqdlError(f"'not' must be followed by between, in or matches, not "
                            f"{self.peek_text()!r}")
        return None

    # --- values -----------------------------------------------------------------------

    def value(self) -> Value:
        """A quoted string, a keyword (NULL, EMPTY, WHITESPACES_ONLY), a $constant, or an
        expression of numbers, durations, now() and last(k)."""
        token = self.peek()
        if token is None:
            raise DqdlError("expected a value, found the end")
        if token.kind == "string":
            self.at += 1
            return token.value
        if token.kind == "variable":
            self.at += 1
            return self._constant(token)
        if token.kind == "word" and token.text.lower() in _KEYWORDS:
            self.at += 1
            return Keyword(_KEYWORDS[token.text.lower()])
        start = self.at
        tree = self._sum()
        return Expression(tree, self.since(self.tokens[start]))

    def _sum(self) -> tuple[Any, ...]:
        left = self._product()
        while (token := self.accept("+") or self.accept("-")) is not None:
            left = ("op", token.text, left, self._product())
        return left

    def _product(self) -> tuple[Any, ...]:
        left = self._unary()
        while (token := self.accept("*") or self.accept("/")) is not None:
            left = ("op", token.text, left, self._unary())
        return left

    def _unary(self) -> tuple[Any, ...]:
        if self.accept("-"):
            return ("negate", self._unary())
        found = self._primary()
        unit = self.peek()
        if unit is not None and unit.kind == "word" and unit.text.lower() in _UNITS:
            self.at += 1
            kind = "duration" if unit.text.lower() in ("days", "hours", "minutes") else "size"
            return (kind, found, unit.text.lower())
        return found

    def _primary(self) -> tuple[Any, ...]:
        token = self.peek()
        if token is None:
            raise DqdlError("expected a value, found the end")
        if token.kind == "number":
            self.at += 1
            number = float(token.text)
            return ("number", int(number) if re.fullmatch(r"\d+", token.text) else number)
        if self.accept("("):
            inner = self._sum()
            self.expect(")")
            return inner
        if token.kind == "word" and (after := self.peek(1)) is not None and after.text == "(":
            self.at += 2
            arguments = []
            if not self.accept(")"):
                arguments.append(self._sum())
                while self.accept(","):
                    arguments.append(self._sum())
                self.expect(")")
            name = token.text.lower()
            return ("now",) if name == "now" else ("call", name, tuple(arguments))
        raise DqdlError(f"expected a number, a quoted value or an expression, found "
                        f"{token.text!r}")
