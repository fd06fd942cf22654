"""τ²-bench domains in solo mode: the agent gets the task's ticket, no user simulator.

The system prompt holds the solo instructions and the domain's solo policy; the user turn is the
ticket. The agent ends the episode by calling `done` (alone: calls beside it are not run, as in τ²)
or by a successful transfer to a human agent; any other ending is premature and scores 0. Each
episode works on its own copy of the task's initial database; `score` is τ²'s reward
(`scoring.py`) and leaves the per-check breakdown in `episode.breakdown`.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any, Sequence

from toolorch_jax.config import ConfigError, load_object
from toolorch_jax.data.task import Task
from toolorch_jax.envs.base import Environment, Episode, Script
from toolorch_jax.envs.tau2 import scoring
from toolorch_jax.envs.tau2.data import Tau2Task, load_domain
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.domains import DOMAINS
from toolorch_jax.envs.tau2.gold import gold_script
from toolorch_jax.envs.tau2.spec_tools import is_domain_dir, load_spec_domain
from toolorch_jax.envs.tau2.toolkit import DONE, DONE_SCHEMA, Domain, Sides
from toolorch_jax.tools.base import ToolCall, ToolContext, ToolError, ToolResult

SOLO_INSTRUCTIONS = (
    "You are a customer service agent. You are given a ticket with a user's request; resolve it by"
    " calling tools, following the policy below. You cannot talk to the user, only call tools.\n"
    f"When the ticket is resolved, call the `{DONE}` tool in a message with no other tool call.")


@dataclasses.dataclass
class Settings:
  domain: str = "mock"
  split: str = "base"  # a key of the domain's split_tasks.json


def resolve_domain(name: str) -> tuple[Domain, Path | None]:
  """`settings.domain`: a built-in domain (files from the data directory), a domain directory
  with a declarative tool spec (a path, e.g. one `toolorch synth` wrote; files from there), or a
  hand-written `Domain` as `module:attr` (files from the data directory, by its name)."""
  if is_domain_dir(name):
    return load_spec_domain(name), Path(name)
  if ":" in name:
    domain = load_object(name, "env.settings.domain")
    if not isinstance(domain, Domain):
      raise ConfigError(f"env.settings.domain: '{name}' is {domain!r}, not a τ² Domain")
    return domain, None
  if name not in DOMAINS:
    raise ConfigError(f"env.settings.domain: τ² domain '{name}' is not implemented yet;"
                      f" implemented: {sorted(DOMAINS)}, a domain directory, or module:attr")
  return DOMAINS[name], None


class Tau2Episode(Episode):
  """One solo episode. Where the user has tools (telecom), the agent gets them too, as in τ²'s
  solo mode, and the two sides are synced after each call."""

  def __init__(self, task: Task, domain: Domain, system_prompt: str, initial: Database,
               user_initial: Database | None = None):
    super().__init__(task)
    self.spec: Tau2Task = task.answer
    self.domain = domain
    self.system_prompt = system_prompt
    self.initial = initial  # kept unchanged: the scorer replays from it
    self.user_initial = user_initial
    self.sides = Sides(domain, initial.copy(), user_initial and user_initial.copy(), solo=True)
    self.db = self.sides.dbs["assistant"]
    self.tools = {**self.sides.tools["assistant"], **self.sides.tools["user"]}
    self.calls: list[tuple[str, Any]] = []  # domain-tool calls in order, failed ones included
    self.texts: list[str] = []  # assistant texts, for communicate_info
    self.ended_by: str | None = None  # "done" or the tool that ended the episode
    self.breakdown: dict[str, Any] = {}

  def messages(self) -> list[dict[str, Any]]:
    return [{"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.spec.ticket}]

  def tool_schemas(self) -> list[dict[str, Any]]:
    return [tool.schema() for tool in self.tools.values()] + [DONE_SCHEMA]

  def observe(self, content: str, tool_calls: Sequence[ToolCall]) -> None:
    if content:
      self.texts.append(content)
    if not self.done and any(call.name == DONE for call in tool_calls):
      self.done, self.ended_by = True, DONE

  async def execute(self, call: ToolCall, context: ToolContext) -> ToolResult:
    if call.name == DONE:
      return ToolResult(text="Episode ended.")
    if self.done:
      return ToolResult(error=f"not run: '{self.ended_by}' ended the episode")
    tool = self.tools.get(call.name)
    if tool is None:
      known = sorted(self.tools) + [DONE]
      return ToolResult(error=f"unknown tool {call.name!r}; available: {known}")
    self.calls.append((call.name, call.arguments))
    result = await tool.call(call.arguments, context)
    if result.ok:
      try:
        self.sides.sync()
      except ToolError as err:  # τ² reports a failed sync as the call's error
        result = ToolResult(error=str(err))
    if tool.ends_episode and result.ok:
      self.done, self.ended_by = True, call.name
    return result

  def score(self) -> float:
    reward, self.breakdown = scoring.score(self.domain, self.spec, self.initial, self.calls,
                                           self.texts, self.done, user_initial=self.user_initial,
                                           solo=True)
    return reward


class Tau2Environment(Environment):
  """A τ² domain read from the data directory (`tau2/domains/<domain>/`), our tools on its db; or
  a domain directory by path, its tools from its declarative spec (`resolve_domain`).

  Solo mode runs the tasks that have a ticket and no prior conversation; the others need τ²'s user
  simulator and are listed in `skipped` with the reason.
  """

  name = "tau2"
  Settings = Settings

  def __init__(self, settings: Settings | None = None):
    self.settings = settings or Settings()
    self.domain, folder = resolve_domain(self.settings.domain)
    data = load_domain(self.domain.name, self.domain.solo_policy or self.domain.policy,
                       self.domain.db_file, self.domain.user_db_file, folder)
    for table in self.domain.tables:
      if not isinstance(data.db.get(table), (dict, list)):
        raise ConfigError(f"tau2/domains/{data.name}/{self.domain.db_file}: '{table}' must be an"
                          " object or a list")
    if self.domain.prepare:
      self.domain.prepare(data.db)
    if data.user_db is not None and self.domain.prepare_user:
      self.domain.prepare_user(data.user_db)
    self.db = Database(data.db)
    self.user_db = None if data.user_db is None else Database(data.user_db)
    self.system_prompt = f"{SOLO_INSTRUCTIONS}\n\n<policy>\n{data.policy.strip()}\n</policy>"
    self.splits = data.splits
    self.skipped: dict[str, str] = {}
    self._tasks: dict[str, Task] = {}
    for spec in data.tasks:
      self._check(spec)
      reason = _solo_unsupported(spec, self.domain)
      if reason:
        self.skipped[spec.id] = reason
      else:
        self._tasks[spec.id] = Task(spec.id, spec.ticket, answer=spec,
                                    metadata={"domain": data.name})
    if self.settings.split not in self.splits:
      raise ConfigError(f"env.settings.split: unknown split '{self.settings.split}' of τ² domain"
                        f" '{data.name}'; splits: {sorted(self.splits)}")

  def _check(self, spec: Tau2Task) -> None:
    """Refuses at load what this domain cannot run or score, naming the task and field."""
    where = f"tau2/domains/{self.domain.name}/tasks.json (id '{spec.id}')"
    criteria = spec.criteria
    domain = self.domain
    functions = {"assistant": ({cls.name for cls in domain.tools} | set(domain.functions),
                               set(domain.assertions))}
    if domain.user_tools:
      functions["user"] = ({cls.name for cls in domain.user_tools} | set(domain.user_functions),
                           set(domain.user_assertions))
    assertions = (criteria.env_assertions or ()) if criteria else ()
    calls = [(f"initial_state.initialization_actions[{i}]", c, 0)
             for i, c in enumerate(spec.init_actions)]
    calls += [(f"evaluation_criteria.env_assertions[{i}]", c, 1) for i, c in enumerate(assertions)]
    for field, call, kind in calls:
      if call.env_type not in functions:
        raise ConfigError(f"{where}: {field}.env_type '{call.env_type}' is not supported: domain"
                          f" '{domain.name}' has tools for {sorted(functions)}")
      known = functions[call.env_type][kind]
      if call.func_name not in known:
        raise ConfigError(f"{where}: {field}.func_name: '{call.func_name}' is not a function of"
                          f" domain '{self.domain.name}'; known: {sorted(known)}")
    if criteria is None:
      return
    requestors = {"assistant", "user"} if domain.user_tools else {"assistant"}
    for i, action in enumerate(criteria.actions or ()):
      if action.requestor not in requestors:
        raise ConfigError(f"{where}: evaluation_criteria.actions[{i}].requestor"
                          f" '{action.requestor}' is not supported: domain '{domain.name}' has"
                          f" tools for {sorted(requestors)}")

  def tasks(self, split: str | None = None) -> Sequence[Task]:
    """The runnable tasks of `split` (default: `settings.split`), in tasks.json order."""
    split = split or self.settings.split
    if split not in self.splits:
      raise ConfigError(f"unknown split '{split}' of τ² domain '{self.domain.name}';"
                        f" splits: {sorted(self.splits)}")
    wanted = set(self.splits[split])
    return [task for task_id, task in self._tasks.items() if task_id in wanted]

  def initial_db(self, spec: Tau2Task) -> Database:
    """The agent's db at the task's start (see `initial_dbs`)."""
    return self.initial_dbs(spec)[0]

  def initial_user_db(self, spec: Tau2Task) -> Database | None:
    """The user's db at the task's start (None where the user has no tools)."""
    return self.initial_dbs(spec)[1]

  def initial_dbs(self, spec: Tau2Task) -> tuple[Database, Database | None]:
    """Both dbs with the task's `initialization_data` merged in and its initialization actions
    run in order, each on its side, the sides synced after each, as τ² sets a task up."""
    agent = self.db.copy()
    user = None if self.user_db is None else self.user_db.copy()
    if spec.agent_data:
      agent.merge(spec.agent_data)
    if spec.user_data and user is not None:
      user.merge(spec.user_data)
    sides = Sides(self.domain, agent, user)
    for i, action in enumerate(spec.init_actions):
      try:
        sides.run(action.env_type, action.func_name, action.arguments)
      except Exception as err:  # pylint: disable=broad-exception-caught  # named, then raised
        raise ConfigError(f"task '{spec.id}': initial_state.initialization_actions[{i}]"
                          f" ({action.func_name}) failed: {err}") from None
    sides.sync()
    return agent, user

  def start(self, task: Task) -> Tau2Episode:
    return Tau2Episode(task, self.domain, self.system_prompt, *self.initial_dbs(_spec(task)))

  def gold_script(self, task: Task, grouped: bool = False) -> Script:
    return gold_script(_spec(task), grouped)

  def demonstrations(self, tasks: Sequence[Task], count: int, seed: int) -> list[dict[str, Any]]:
    """`count` gold conversations (the gold actions with the domain's real results, then `done`),
    of tasks drawn at random: what a warm start imitates before RL."""
    rng = random.Random(seed)
    tasks = list(tasks)
    return [self._gold_conversation(rng.choice(tasks)) for _ in range(count)]

  def _gold_conversation(self, task: Task) -> dict[str, Any]:
    """The gold script's turns with each call's real result on a fresh episode's database, up to
    the turn that ends the episode (`done`, or a tool such as a transfer)."""
    episode, script = self.start(task), self.gold_script(task)
    messages, tools = episode.messages(), episode.tool_schemas()
    while True:
      turn = script(messages, tools)
      messages.append(turn)
      for call in turn["tool_calls"]:
        if call["name"] == DONE:
          return {"messages": messages, "tools": tools}
        outcome = episode.sides.call("assistant", call["name"], call["arguments"])
        if outcome.error:
          raise ConfigError(f"task '{task.task_id}': gold action {call['name']} failed:"
                            f" {outcome.text}")
        if episode.tools[call["name"]].ends_episode:
          return {"messages": messages, "tools": tools}
        messages.append({"role": "tool", "content": outcome.text, "name": call["name"]})


def _spec(task: Task) -> Tau2Task:
  if not isinstance(task.answer, Tau2Task):
    raise TypeError(f"task '{task.task_id}' is not a τ² task (its answer is not a Tau2Task)")
  return task.answer


def _solo_unsupported(spec: Tau2Task, domain: Domain) -> str | None:
  if domain.solo_policy is None:
    return f"τ² has no solo policy for domain '{domain.name}': it needs a user simulator"
  if spec.ticket is None:
    return "no ticket: the request is only in the user simulator's instructions"
  if spec.message_history:
    return "initial_state.message_history: a prior conversation is not supported in solo mode"
  return None
