"""What every τ² domain is made of here: tools bound to an episode's database, and the domain spec.

A domain tool's work is the synchronous `apply`, so the scorer can replay recorded calls on a fresh
database outside the event loop; `run` wraps it for the episode loop, where `Tool.call` turns every
failure into `ToolResult.error`.
"""

from __future__ import annotations

import abc
import dataclasses
import json
import types
from typing import Any, Callable, ClassVar, Iterable, Mapping

from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.tools.base import Tool, ToolContext, ToolResult

Assertion = Callable[[Database, Mapping[str, Any]], bool]  # an env assertion on the end state
DONE = "done"  # τ²'s solo-mode stop tool
DONE_SCHEMA = {"type": "function", "function": {
    "name": DONE,
    "description": "Call when the ticket is resolved, alone in its message: it ends the episode.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}}


class DomainTool(Tool):
  """A τ² domain tool; subclasses set the class attributes `name`, `description`, `parameters`."""

  ends_episode: ClassVar[bool] = False  # e.g. a transfer to a human agent

  def __init__(self, db: Database):
    super().__init__(self.name)
    self.db = db

  @abc.abstractmethod
  def apply(self, arguments: dict[str, Any]) -> Any:
    """The call on validated arguments: JSON-able data or text. It fails (ToolError) where τ²'s
    tool does and changes what τ²'s changes before failing, which is mostly nothing."""

  def respond(self, arguments: dict[str, Any]) -> str:
    """`apply`, and its output as the agent reads it, written as τ² writes it."""
    return render(self.apply(arguments))

  async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    return ToolResult(text=self.respond(arguments))


def render(output: Any) -> str:
  """τ²'s tool message text: text as it is, anything else as JSON (a bare number or flag as the
  JSON string of its text, as τ² writes it)."""
  if isinstance(output, str):
    return output
  if isinstance(output, (bool, int, float)):
    output = str(output)
  return json.dumps(output, default=str)


NO_ASSERTIONS: Mapping[str, Assertion] = types.MappingProxyType({})


@dataclasses.dataclass(frozen=True)
class Domain:
  """Our implementation of a τ² domain; its db, tasks and policies come from the data directory.

  `policy` is the agent's policy beside a user simulator; `solo_policy` the one for solo mode (None
  where τ² has none). The user's tools (telecom's phone) work on their own database, `user_db_file`.
  """

  name: str
  tools: tuple[type[DomainTool], ...]
  assertions: Mapping[str, Assertion]
  tables: tuple[str, ...]  # top-level objects of the db the tools rely on
  solo_policy: str | None = "policy_solo.md"
  user_tools: tuple[type[DomainTool], ...] = ()
  user_assertions: Mapping[str, Assertion] = dataclasses.field(default_factory=lambda: NO_ASSERTIONS)
  db_file: str = "db.json"
  user_db_file: str | None = None
  policy: str = "policy.md"

  def bind(self, db: Database) -> dict[str, DomainTool]:
    return {cls.name: cls(db) for cls in self.tools}

  def bind_user(self, db: Database) -> dict[str, DomainTool]:
    return {cls.name: cls(db) for cls in self.user_tools}


@dataclasses.dataclass(frozen=True)
class Outcome:
  """One call as τ² reports it: the tool message text and whether it was an error."""

  text: str
  error: bool


def attempt(tools: Mapping[str, DomainTool], name: str, arguments: Any) -> Outcome:
  """Runs one call synchronously; a failure is τ²'s `Error: ...` message, never a raise."""
  tool = tools.get(name)
  if tool is None:
    return Outcome(f"Error: Tool '{name}' not found.", True)
  try:
    return Outcome(tool.respond(tool.validate(arguments)), False)
  except Exception as err:  # pylint: disable=broad-exception-caught  # as `Tool.call` does live
    return Outcome(f"Error: {err}", True)


def replay(tools: Mapping[str, DomainTool],
           calls: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
  """Applies calls in order and returns the errors, each prefixed with its tool's name."""
  errors = []
  for name, arguments in calls:
    outcome = attempt(tools, name, arguments)
    if outcome.error:
      errors.append(f"{name}: {outcome.text.removeprefix('Error: ')}")
  return errors
