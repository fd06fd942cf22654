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
from toolorch_jax.tools.base import Tool, ToolContext, ToolError, ToolResult

Assertion = Callable[[Database, Mapping[str, Any]], bool]  # an env assertion on the end state
EnvFunction = Callable[[Database, Mapping[str, Any]], Any]  # e.g. an initialization action
Sync = Callable[[Database, Database], None]  # brings the user's db in line with the agent's
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
  # env functions that are not tools (initialization actions), per side
  functions: Mapping[str, EnvFunction] = dataclasses.field(default_factory=lambda: NO_ASSERTIONS)
  user_functions: Mapping[str, EnvFunction] = dataclasses.field(
      default_factory=lambda: NO_ASSERTIONS)
  sync: Sync | None = None  # run after every call, as τ²'s environment syncs its two sides
  # fill in what τ²'s data model adds to the files (defaults, date formats), per side
  prepare: Callable[[dict[str, Any]], None] | None = None
  prepare_user: Callable[[dict[str, Any]], None] | None = None

  def bind(self, db: Database) -> dict[str, DomainTool]:
    return {cls.name: cls(db) for cls in self.tools}

  def bind_user(self, db: Database) -> dict[str, DomainTool]:
    return {cls.name: cls(db) for cls in self.user_tools}

  def env_function(self, side: str, name: str) -> Callable[[Database, Mapping[str, Any]], Any]:
    """A function τ² may run on a side's environment: a tool, an env function or an assertion."""
    tools = self.user_tools if side == "user" else self.tools
    for cls in tools:
      if cls.name == name:
        return lambda db, arguments, cls=cls: cls(db).apply(cls(db).validate(arguments))
    functions = self.user_functions if side == "user" else self.functions
    assertions = self.user_assertions if side == "user" else self.assertions
    if name in functions:
      return functions[name]
    if name in assertions:
      return assertions[name]
    raise KeyError(f"'{name}' is not a function of the {side} side of domain '{self.name}'")


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


class Sides:
  """An episode's two databases (the user's None where the user has no tools) with their tools,
  run as τ²'s environment runs them: a call, then the sync of the two sides; a sync that fails
  makes the call's outcome an error, as in τ². `solo` lets the agent call the user's tools."""

  def __init__(self, domain: Domain, agent: Database, user: Database | None = None,
               solo: bool = False):
    self.domain, self.solo = domain, solo
    self.dbs = {"assistant": agent, "user": user}
    self.tools = {"assistant": domain.bind(agent),
                  "user": domain.bind_user(user) if user is not None else {}}

  def side_of(self, requestor: str, name: str) -> str:
    if (self.solo and requestor == "assistant" and name not in self.tools["assistant"]
        and name in self.tools["user"]):
      return "user"
    return requestor

  def call(self, requestor: str, name: str, arguments: Any, sync: bool = True) -> Outcome:
    outcome = attempt(self.tools[self.side_of(requestor, name)], name, arguments)
    if sync and not outcome.error:
      try:
        self.sync()
      except Exception as err:  # pylint: disable=broad-exception-caught  # τ² reports it so
        return Outcome(f"Error: {err}", True)
    return outcome

  def run(self, side: str, name: str, arguments: Mapping[str, Any]) -> Any:
    """An env function (initialization action or assertion) on `side`, then the sync; raises."""
    db = self.dbs[side]
    if db is None:
      raise ToolError(f"domain '{self.domain.name}' has no {side} database")
    result = self.domain.env_function(side, name)(db, arguments)
    self.sync()
    return result

  def sync(self) -> None:
    if self.domain.sync is not None and self.dbs["user"] is not None:
      self.domain.sync(self.dbs["assistant"], self.dbs["user"])


def replay(tools: Mapping[str, DomainTool],
           calls: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
  """Applies calls in order and returns the errors, each prefixed with its tool's name."""
  errors = []
  for name, arguments in calls:
    outcome = attempt(tools, name, arguments)
    if outcome.error:
      errors.append(f"{name}: {outcome.text.removeprefix('Error: ')}")
  return errors
