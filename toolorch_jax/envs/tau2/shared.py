"""What several τ² domains share: builders for their tools' JSON schemas, `calculate` and the
transfer to a human agent.

τ² derives each tool's schema from its Python signature; here they are written out, with the
types τ²'s signatures declare, and no extra properties (τ² refuses an unknown keyword).
"""

from __future__ import annotations

import ast
import operator
from typing import Any, ClassVar

from toolorch_jax.envs.tau2.toolkit import DomainTool
from toolorch_jax.tools.base import ToolError

STRING = {"type": "string"}
INTEGER = {"type": "integer"}
NUMBER = {"type": "number"}
STRINGS = {"type": "array", "items": STRING}


def obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
  """An object schema: `required` and `optional` properties, nothing else."""
  return {"type": "object", "properties": {**required, **(optional or {})},
          "required": list(required), "additionalProperties": False}


def described(schema: dict[str, Any], description: str) -> dict[str, Any]:
  return {**schema, "description": description}


def enum(*values: str) -> dict[str, Any]:
  return {"type": "string", "enum": list(values)}


def whole(value: Any, field: str) -> int:
  """An integer field as τ²'s data model takes it (a whole float is fine, a fraction is not)."""
  if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
    raise ToolError(f"{field}: input should be a valid integer, got {value!r}")
  return int(value)


_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
              ast.Mod: operator.mod, ast.USub: operator.neg, ast.UAdd: operator.pos}


def _evaluate(node: ast.AST) -> Any:
  if isinstance(node, ast.Expression):
    return _evaluate(node.body)
  if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
    return node.value
  if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
    return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
  if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
    return _OPERATORS[type(node.op)](_evaluate(node.operand))
  raise ToolError(f"unsupported expression: {ast.dump(node)}")


class Calculate(DomainTool):
  """τ²'s calculator: digits, + - * / ( ) . and spaces, the result rounded to 2 decimals.

  Evaluated on the syntax tree of those characters (what Python's arithmetic gives), never by
  `eval`; errors read as τ²'s (`division by zero`, `invalid syntax (<string>, line 1)`)."""

  name = "calculate"
  description = "Calculate the result of a mathematical expression."
  parameters: ClassVar[dict[str, Any]] = obj({"expression": described(
      STRING, "The mathematical expression to calculate, such as '2 + 2'. The expression can"
      " contain numbers, operators (+, -, *, /), parentheses, and spaces.")})

  def apply(self, arguments: dict[str, Any]) -> str:
    expression = arguments["expression"]
    if not all(char in "0123456789+-*/(). " for char in expression):
      raise ToolError("Invalid characters in expression")
    try:
      tree = ast.parse(expression.strip(), "<string>", mode="eval")
    except SyntaxError as err:
      raise ToolError(str(err)) from None
    try:
      return str(round(float(_evaluate(tree)), 2))
    except ZeroDivisionError as err:
      raise ToolError(str(err)) from None


class TransferToHumanAgents(DomainTool):
  """Hands the user to a human: ends the episode, as in every τ² domain."""

  name = "transfer_to_human_agents"
  description = ("Transfer the user to a human agent, with a summary of the user's issue. Only"
                 " transfer if the user explicitly asks for a human agent, or if, given the policy"
                 " and the available tools, you cannot solve the user's issue.")
  parameters: ClassVar[dict[str, Any]] = obj(
      {"summary": described(STRING, "A summary of the user's issue.")})
  ends_episode = True

  def apply(self, arguments: dict[str, Any]) -> str:
    return "Transfer successful"
