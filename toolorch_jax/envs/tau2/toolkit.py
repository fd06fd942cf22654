"""What every τ² domain is made of here: tools bound to an episode's database, and the domain spec.

A domain tool's work is the synchronous `apply`, so the scorer can replay recorded calls on a fresh
database outside the event loop; `run` wraps it for the episode loop, where `Tool.call` turns every
failure into `ToolResult.error`.
"""

from __future__ import annotations

import abc
import dataclasses
import json
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
    """The call on validated arguments: JSON-able data or text; a ToolError changes nothing."""

  def respond(self, arguments: dict[str, Any]) -> str:
    """`apply`, and its output as the agent reads it (JSON unless it is text)."""
    output = self.apply(arguments)
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)

  async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    return ToolResult(text=self.respond(arguments))


@dataclasses.dataclass(frozen=True)
class Domain:
  """Our implementation of a τ² domain; its db, tasks and policy come from the data directory."""

  name: str
  tools: tuple[type[DomainTool], ...]
  assertions: Mapping[str, Assertion]
  tables: tuple[str, ...]  # top-level objects of db.json the tools rely on
  user_tools: tuple[type[DomainTool], ...] = ()  # the user's own (telecom's phone): dual control
  user_assertions: Mapping[str, Assertion] = dataclasses.field(default_factory=dict)
  db_file: str = "db.json"
  user_db_file: str | None = None  # the user's database, when the domain has user tools
  policy: str = "policy.md"  # the agent's policy with a user simulator
  solo_policy: str | None = "policy_solo.md"  # None: the domain has no solo mode

  def bind(self, db: Database) -> dict[str, DomainTool]:
    return {cls.name: cls(db) for cls in self.tools}

  def bind_user(self, db: Database) -> dict[str, DomainTool]:
    return {cls.name: cls(db) for cls in self.user_tools}


def replay(tools: Mapping[str, DomainTool],
           calls: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
  """Applies calls in order and returns the errors; a failed call changes nothing, as live."""
  errors = []
  for name, arguments in calls:
    tool = tools.get(name)
    if tool is None:
      errors.append(f"{name}: not a tool of this domain")
      continue
    try:
      tool.apply(tool.validate(arguments))
    except Exception as err:  # pylint: disable=broad-exception-caught  # as `Tool.call` does live
      errors.append(f"{name}: {err}")
  return errors
