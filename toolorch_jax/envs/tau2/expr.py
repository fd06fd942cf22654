"""A small, safe expression language for declarative domain tools (`spec_tools.py`).

Synthesised domains compute derived values and check preconditions with expressions such as
`member.fines + book.late_fee * 2` or `account.balance >= args.amount and account.status == 'open'`.
They are parsed here into a tree of tuples and evaluated by walking it: no `eval`, no attribute
access, no imports; names are dotted paths into the values a tool gives (`args`, loaded rows,
`now`, `today`), and the only functions are those in FUNCTIONS. Errors name the expression.

Grammar (lowest precedence first):
  or := and ('or' and)* · and := not ('and' not)* · not := 'not' not | cmp
  cmp := sum (('=='|'!='|'<'|'<='|'>'|'>='|'in') sum)? · sum := prod (('+'|'-') prod)*
  prod := unary (('*'|'/'|'%') unary)* · unary := '-' unary | atom
  atom := number | 'string' | true | false | null | name ('(' args ')')? | '(' or ')'
"""

from __future__ import annotations

import datetime
import functools
import re
from typing import Any, Callable, Mapping

Node = tuple


class ExprError(ValueError):
  """An expression that does not parse, or fails on the values it is given."""


def _add_days(date: str, days: int) -> str:
  return (datetime.date.fromisoformat(str(date)[:10]) + datetime.timedelta(days=int(days))).isoformat()


def _days_between(start: str, end: str) -> int:
  return (datetime.date.fromisoformat(str(end)[:10])
          - datetime.date.fromisoformat(str(start)[:10])).days


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "round": lambda x, n=2: round(float(x), int(n)),
    "len": len, "abs": abs, "min": min, "max": max,
    "lower": lambda s: str(s).lower(), "upper": lambda s: str(s).upper(),
    "str": str, "int": int,
    "concat": lambda *parts: "".join(str(p) for p in parts),
    "contains": lambda haystack, needle: str(needle).lower() in str(haystack).lower(),
    "add_days": _add_days, "days_between": _days_between,
    "coalesce": lambda *values: next((v for v in values if v is not None), None),
}
_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<str>'[^']*'|\"[^\"]*\")"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
                    r"|(?P<op>==|!=|<=|>=|[-+*/%<>(),]))")
_COMPARE = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
            "in": lambda a, b: a in b}
_ARITH = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
          "/": lambda a, b: a / b, "%": lambda a, b: a % b}
_CONSTANTS = {"true": True, "false": False, "null": None}


def _tokens(text: str) -> list[tuple[str, str]]:
  tokens, pos = [], 0
  text = text.rstrip()
  while pos < len(text):
    match = _TOKEN.match(text, pos)
    if not match or match.end() == pos:
      raise ExprError(f"expression {text!r}: unexpected character at {pos}: {text[pos:pos + 10]!r}")
    kind = match.lastgroup
    tokens.append((kind, match.group(kind)))
    pos = match.end()
  return tokens


class _Parser:
  def __init__(self, text: str):
    self.text, self.tokens, self.pos = text, _tokens(text), 0

  def peek(self) -> str | None:
    return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

  def take(self, expected: str | None = None) -> tuple[str, str]:
    if self.pos >= len(self.tokens):
      raise ExprError(f"expression {self.text!r}: ends too early")
    token = self.tokens[self.pos]
    if expected is not None and token[1] != expected:
      raise ExprError(f"expression {self.text!r}: expected {expected!r}, got {token[1]!r}")
    self.pos += 1
    return token

  def parse(self) -> Node:
    node = self.or_()
    if self.pos != len(self.tokens):
      raise ExprError(f"expression {self.text!r}: unexpected {self.peek()!r}")
    return node

  def or_(self) -> Node:
    node = self.and_()
    while self.peek() == "or":
      self.take()
      node = ("or", node, self.and_())
    return node

  def and_(self) -> Node:
    node = self.not_()
    while self.peek() == "and":
      self.take()
      node = ("and", node, self.not_())
    return node

  def not_(self) -> Node:
    if self.peek() == "not":
      self.take()
      return ("not", self.not_())
    return self.compare()

  def compare(self) -> Node:
    node = self.sum()
    if self.peek() in _COMPARE:
      op = self.take()[1]
      node = ("cmp", op, node, self.sum())
    return node

  def sum(self) -> Node:
    node = self.product()
    while self.peek() in ("+", "-"):
      node = ("arith", self.take()[1], node, self.product())
    return node

  def product(self) -> Node:
    node = self.unary()
    while self.peek() in ("*", "/", "%"):
      node = ("arith", self.take()[1], node, self.unary())
    return node

  def unary(self) -> Node:
    if self.peek() == "-":
      self.take()
      return ("arith", "-", ("const", 0), self.unary())
    return self.atom()

  def atom(self) -> Node:
    kind, value = self.take()
    if kind == "num":
      return ("const", float(value) if "." in value else int(value))
    if kind == "str":
      return ("const", value[1:-1])
    if value == "(":
      node = self.or_()
      self.take(")")
      return node
    if kind != "name" or value in ("and", "or", "not", "in"):
      raise ExprError(f"expression {self.text!r}: unexpected {value!r}")
    if value in _CONSTANTS:
      return ("const", _CONSTANTS[value])
    if self.peek() == "(":
      if value not in FUNCTIONS:
        raise ExprError(f"expression {self.text!r}: unknown function {value!r};"
                        f" known: {sorted(FUNCTIONS)}")
      self.take("(")
      args = []
      while self.peek() != ")":
        args.append(self.or_())
        if self.peek() != ")":
          self.take(",")
      self.take(")")
      return ("call", value, tuple(args))
    return ("name", tuple(value.split(".")))


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Node:
  """The tree of `text`; ExprError when it does not parse."""
  if not isinstance(text, str) or not text.strip():
    raise ExprError(f"expression {text!r}: expected a non-empty string")
  return _Parser(text).parse()


def names(node: Node) -> set[str]:
  """The first part of every name the expression reads (to check them before running)."""
  kind = node[0]
  if kind == "name":
    return {node[1][0]}
  if kind == "const":
    return set()
  children = node[2] if kind == "call" else node[1:]
  return set().union(*(names(c) for c in children if isinstance(c, tuple)))


def _lookup(path: tuple[str, ...], scope: Mapping[str, Any], text: str) -> Any:
  value: Any = scope
  for i, part in enumerate(path):
    if not isinstance(value, Mapping) or part not in value:
      raise ExprError(f"expression {text!r}: no value '{'.'.join(path[:i + 1])}'")
    value = value[part]
  return value


def _eval(node: Node, scope: Mapping[str, Any], text: str) -> Any:
  kind = node[0]
  if kind == "const":
    return node[1]
  if kind == "name":
    return _lookup(node[1], scope, text)
  if kind == "and":
    return bool(_eval(node[1], scope, text)) and bool(_eval(node[2], scope, text))
  if kind == "or":
    return bool(_eval(node[1], scope, text)) or bool(_eval(node[2], scope, text))
  if kind == "not":
    return not _eval(node[1], scope, text)
  try:
    if kind == "call":
      return FUNCTIONS[node[1]](*(_eval(arg, scope, text) for arg in node[2]))
    table = _COMPARE if kind == "cmp" else _ARITH
    return table[node[1]](_eval(node[2], scope, text), _eval(node[3], scope, text))
  except ExprError:
    raise
  except (TypeError, ValueError, ZeroDivisionError, OverflowError) as err:
    raise ExprError(f"expression {text!r}: {type(err).__name__}: {err}") from None


def evaluate(text: str, scope: Mapping[str, Any]) -> Any:
  """The value of expression `text` with names read from `scope`; ExprError when it fails.
  Floats are rounded to 6 decimals so results are the same bytes on every machine."""
  value = _eval(parse(text), scope, text)
  return round(value, 6) if isinstance(value, float) else value
