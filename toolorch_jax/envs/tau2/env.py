"""τ²-bench domains, with a simulated user (τ²'s default) or solo, optionally as an orchestrator.

With a user (`mode: user`) the agent first greets, the simulated user (`user_sim.py`: a model over
an OpenAI-compatible endpoint, or recorded turns) states its request, and each agent turn without
tool calls goes to the user, whose answer is the next user message. The user's tool calls run on
its own database (dual control, as telecom's phone). The conversation ends when the user says a
stop token (or the agent `###STOP###`); running out of steps, too many tool errors or a failure on
the user's side end it prematurely, which scores 0.

Solo (`mode: solo`, where the domain has a solo policy): the agent gets the task's ticket and ends
the episode by calling `done` (alone: calls beside it are not run, as in τ²) or by a successful
transfer to a human agent; any other ending is premature. Where the user has tools (telecom), the
solo agent gets them too, as in τ²'s solo mode. The two sides are synced after every call
(`toolkit.Sides`), and the scorer replays the calls in the order they ran.

As an orchestrator (`agent: orchestrator`), the policy also has ToolOrchestra's `call_expert`
(`orchestrator.py`). Each episode works on its own copies of the task's initial databases; `score`
is τ²'s reward (`scoring.py`) and leaves the per-check breakdown in `episode.breakdown`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
from pathlib import Path
from typing import Any, Callable, Sequence

from toolorch_jax.config import ConfigError, load_config, load_object
from toolorch_jax.data.task import Task
from toolorch_jax.envs.base import Environment, Episode, Reply, Script
from toolorch_jax.envs.tau2 import scoring
from toolorch_jax.envs.tau2.data import Tau2Task, load_domain
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.domains import DOMAINS
from toolorch_jax.envs.tau2.gold import consulting, dialogue_script, gold_script
from toolorch_jax.envs.tau2.orchestrator import (CALL_EXPERT, GOLD_QUESTION, ExpertDesk,
                                                 INSTRUCTIONS as EXPERT_INSTRUCTIONS)
from toolorch_jax.envs.tau2.spec_tools import is_domain_dir, load_spec_domain
from toolorch_jax.envs.tau2.toolkit import DONE, DONE_SCHEMA, Domain, Sides
from toolorch_jax.envs.tau2.user_sim import (GREETING, STOP, LLMUser, ScriptedUser, UserModel,
                                             UserReply, UserSide, gold_turns, read_script)
from toolorch_jax.tools import ModelCatalog, ToolSetConfig, load_toolset
from toolorch_jax.tools.registry import toolset_path
from toolorch_jax.tools.base import Tool, ToolCall, ToolContext, ToolError, ToolResult
from toolorch_jax.tools.http_retry import RetryPolicy

SOLO_INSTRUCTIONS = (
    "You are a customer service agent. You are given a ticket with a user's request; resolve it by"
    " calling tools, following the policy below. You cannot talk to the user, only call tools.\n"
    f"When the ticket is resolved, call the `{DONE}` tool in a message with no other tool call.")
USER_INSTRUCTIONS = (
    "You are a customer service agent helping a user, following the policy below. In each turn"
    " either send the user a message (without tool calls) or make tool calls, not both. Help the"
    " user, always follow the policy, and give tool arguments as valid JSON.")
MODES = ("user", "solo")
AGENTS = ("plain", "orchestrator")
USER_KINDS = ("llm", "scripted", "gold")


@dataclasses.dataclass
class UserSettings:
  """Who plays the user in `mode: user`."""

  # llm: a model over an OpenAI-compatible endpoint; scripted: recorded turns (`script`); gold: each
  # task's request, then the gold actions the task assigns the user (`user_sim.gold_turns`)
  kind: str = "llm"
  toolset: str = "toolorchestra"  # the tool set whose model catalog has `model`
  model: str = "gpt-5"  # ToolOrchestra's τ² runs use GPT-5 as the user
  temperature: float | None = None  # None: the server's default
  body: dict[str, Any] = dataclasses.field(default_factory=dict)  # more request fields
  retry: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)
  script: str = ""  # scripted: a name in configs/users/, or a YAML/JSON file of turns per task
  max_tool_steps: int = 10  # user tool calls in a row before it must say something


@dataclasses.dataclass
class Settings:
  domain: str = "mock"
  split: str = "base"  # a key of the domain's split_tasks.json
  mode: str = "user"  # user: a simulated user, τ²'s default; solo: the ticket, no user
  agent: str = "plain"  # plain: the domain tools; orchestrator: and ToolOrchestra's call_expert
  user: UserSettings = dataclasses.field(default_factory=UserSettings)
  toolset: str = "tau2_experts"  # orchestrator: the tool set holding the expert tool
  expert_tool: str = "expert"  # orchestrator: an llm_expert or recorded_expert tool there
  # orchestrator: an expert alias the gold policy asks GOLD_QUESTION before acting, so gold runs
  # and warm-start demonstrations show `call_expert` in use ("" = the gold never asks)
  gold_consult: str = ""
  max_steps: int = 200  # messages (agent turns, tool calls and results, user messages)
  max_errors: int = 10  # failed tool calls, the agent's and the user's


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


UserFactory = Callable[[Sides, list[str]], UserSide]  # the episode's sides and call order -> user


class Tau2Episode(Episode):
  """One conversation. `order` records whose each domain call was ("assistant" or "user"), in
  the order they ran: the scorer replays them so, as the sides are synced after every call."""

  def __init__(self, task: Task, domain: Domain, system_prompt: str, initial: Database,
               user_initial: Database | None = None, user: UserFactory | None = None,
               desk: ExpertDesk | None = None, limits: tuple[int, int] = (200, 10)):
    super().__init__(task)
    self.spec: Tau2Task = task.answer
    self.domain = domain
    self.system_prompt = system_prompt
    self.initial = initial  # kept unchanged: the scorer replays from it
    self.user_initial = user_initial
    self.solo = user is None
    self.sides = Sides(domain, initial.copy(), user_initial and user_initial.copy(), self.solo)
    self.db = self.sides.dbs["assistant"]
    self.tools: dict[str, Tool] = dict(self.sides.tools["assistant"])
    if self.solo:  # τ²'s solo agent also works the user's tools (telecom's phone)
      self.tools.update(self.sides.tools["user"])
    self.order: list[str] = []
    self.user = None if user is None else user(self.sides, self.order)  # None: solo
    self.desk = desk
    if desk is not None:
      self.tools[CALL_EXPERT] = desk.bind(self)
    self.calls: list[tuple[str, Any]] = []  # domain-tool calls in order, failed ones included
    self.texts: list[str] = []  # assistant texts, for communicate_info
    self.log: list[dict[str, str]] = []  # the conversation as the agent saw it (for experts)
    self.ended_by: str | None = None  # solo: "done" or the tool that ended the episode
    self.termination: str | None = None  # user mode: why the conversation ended
    self.opening = ""
    self.max_steps, self.max_errors = limits
    self.steps = self.errors = 0
    self.breakdown: dict[str, Any] = {}

  # ----- the conversation ------------------------------------------------------------------------

  def messages(self) -> list[dict[str, Any]]:
    system = {"role": "system", "content": self.system_prompt}
    if self.user is None:
      return [system, {"role": "user", "content": self.spec.ticket}]
    return [system, {"role": "assistant", "content": GREETING},
            {"role": "user", "content": self.opening}]

  def tool_schemas(self) -> list[dict[str, Any]]:
    schemas = [tool.schema() for tool in self.tools.values()]
    return schemas if self.user else schemas + [DONE_SCHEMA]

  async def begin(self, context: ToolContext) -> Reply | None:
    if self.user is None:
      self.log.append({"role": "user", "content": self.spec.ticket or ""})
      return None
    self.log.append({"role": "assistant", "content": GREETING})
    reply = await self._ask_user(GREETING)
    self.opening = reply.text
    return Reply(reply.text, reply.cost_usd, reply.latency_s)

  async def reply(self, content: str, context: ToolContext) -> Reply | None:
    if self.user is None:
      return None
    if STOP in content:
      self._end("agent_stop")
      return None
    reply = await self._ask_user(content)
    return Reply(reply.text, reply.cost_usd, reply.latency_s)

  async def _ask_user(self, content: str) -> UserReply:
    reply = await self.user.respond(content)
    self.log.append({"role": "user", "content": reply.text})
    self.steps += reply.steps
    self.errors += reply.tool_errors
    if reply.error:
      self._end("user_error")
      self.breakdown["user_error"] = reply.error
    elif reply.stop:
      self._end("user_stop")
    else:
      self._check_limits()
    return reply

  def _end(self, termination: str) -> None:
    if not self.done:
      self.done, self.termination = True, termination

  def _check_limits(self) -> None:
    if self.steps >= self.max_steps:
      self._end("max_steps")
    elif self.errors > self.max_errors:
      self._end("too_many_errors")

  # ----- the agent's turns -----------------------------------------------------------------------

  def observe(self, content: str, tool_calls: Sequence[ToolCall]) -> None:
    if content:
      self.texts.append(content)
      self.log.append({"role": "assistant", "content": content})
    if self.user is None:
      if not self.done and any(call.name == DONE for call in tool_calls):
        self.done, self.ended_by = True, DONE
      return
    self.steps += 1
    self._check_limits()

  async def execute(self, call: ToolCall, context: ToolContext) -> ToolResult:
    if call.name == DONE and self.user is None:
      return ToolResult(text="Episode ended.")
    if self.done:
      return ToolResult(error=f"not run: '{self.ended_by}' ended the episode" if self.ended_by
                        else f"not run: the conversation has ended ({self.termination})")
    tool = self.tools.get(call.name)
    if tool is None:
      known = sorted(self.tools) + ([] if self.user else [DONE])
      result = ToolResult(error=f"unknown tool {call.name!r}; available: {known}")
    else:
      result = await tool.call(call.arguments, context)
      if call.name != CALL_EXPERT:
        self.calls.append((call.name, call.arguments))
        self.order.append("assistant")
        if result.ok:
          try:
            self.sides.sync()
          except ToolError as err:  # τ² reports a failed sync as the call's error
            result = ToolResult(error=str(err))
    self.log.append({"role": "tool", "content": f"{call.name}({call.arguments}) -> "
                     + (f"Error: {result.error}" if result.error else result.text)})
    if self.user is None:
      if getattr(tool, "ends_episode", False) and result.ok:
        self.done, self.ended_by = True, call.name
      return result
    self.steps += 2  # the call and its result
    self.errors += result.error is not None
    self._check_limits()
    return result

  def score(self) -> float:
    if self.user is None:
      ended = self.done
      user_calls: list = []
    else:
      ended = self.termination in ("user_stop", "agent_stop")
      user_calls = self.user.calls
    reward, breakdown = scoring.score(self.domain, self.spec, self.initial, self.calls, self.texts,
                                      ended, user_initial=self.user_initial, user_calls=user_calls,
                                      order=self.order, solo=self.solo)
    self.breakdown = {**breakdown, **({"termination": self.termination} if self.user else {}),
                      **{k: v for k, v in self.breakdown.items() if k == "user_error"}}
    return reward


class Tau2Environment(Environment):
  """A τ² domain read from the data directory (`tau2/domains/<domain>/`), our tools on its db; or
  a domain directory by path, its tools from its declarative spec (`resolve_domain`).

  Tasks a mode cannot run are listed in `skipped` with the reason: in solo mode those without a
  ticket or with a prior conversation, with a user those without a `user_scenario` or with a prior
  conversation.
  """

  name = "tau2"
  Settings = Settings

  def __init__(self, settings: Settings | None = None):
    self.settings = s = settings or Settings()
    for key, value, allowed in (("mode", s.mode, MODES), ("agent", s.agent, AGENTS),
                                ("user.kind", s.user.kind, USER_KINDS)):
      if value not in allowed:
        raise ConfigError(f"env.settings.{key}: unknown value '{value}'; one of {allowed}")
    if s.max_steps < 1 or s.max_errors < 0 or s.user.max_tool_steps < 0:
      raise ConfigError("env.settings: need max_steps >= 1, max_errors >= 0 and"
                        " user.max_tool_steps >= 0")
    self.domain, folder = resolve_domain(s.domain)
    if s.mode == "solo" and self.domain.solo_policy is None:
      raise ConfigError(f"env.settings.mode: τ² domain '{s.domain}' has no solo policy; use"
                        " mode: user")
    policy = self.domain.solo_policy if s.mode == "solo" else self.domain.policy
    data = load_domain(self.domain.name, policy, self.domain.db_file, self.domain.user_db_file,
                       folder)
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
    self.desk = self._desk(data.policy) if s.agent == "orchestrator" else None
    if s.gold_consult and (self.desk is None or s.gold_consult not in self.desk.models):
      raise ConfigError(f"env.settings.gold_consult: '{s.gold_consult}' is not an expert of"
                        f" call_expert ({self.desk.models if self.desk else 'agent: plain'})")
    instructions = SOLO_INSTRUCTIONS if s.mode == "solo" else USER_INSTRUCTIONS
    if self.desk:
      instructions += "\n" + EXPERT_INSTRUCTIONS
    self.system_prompt = f"{instructions}\n\n<policy>\n{data.policy.strip()}\n</policy>"
    self.user_model = self._user_model(data.tasks) if s.mode == "user" else None
    self.splits = data.splits
    self.skipped: dict[str, str] = {}
    self._tasks: dict[str, Task] = {}
    for spec in data.tasks:
      self._check(spec)
      reason = _unsupported(spec, s.mode)
      if reason:
        self.skipped[spec.id] = reason
      else:
        self._tasks[spec.id] = Task(spec.id, spec.ticket or "", answer=spec,
                                    metadata={"domain": data.name})
    if s.split not in self.splits:
      raise ConfigError(f"env.settings.split: unknown split '{s.split}' of τ² domain"
                        f" '{data.name}'; splits: {sorted(self.splits)}")

  def _desk(self, policy: str) -> ExpertDesk:
    tools = load_toolset(self.settings.toolset)
    if self.settings.expert_tool not in tools:
      raise ConfigError(f"env.settings.expert_tool: the tool set '{self.settings.toolset}' has no"
                        f" tool '{self.settings.expert_tool}' (tools: {', '.join(tools)})")
    return ExpertDesk(tools[self.settings.expert_tool], policy, "env.settings.expert_tool")

  def _user_model(self, tasks: Sequence[Tau2Task]) -> UserModel:
    u = self.settings.user
    if u.kind == "gold":
      return ScriptedUser({t.id: gold_turns(t.user_scenario, [
          (a.name, a.arguments) for a in (t.criteria.actions or () if t.criteria else ())
          if a.requestor == "user"]) for t in tasks})
    if u.kind == "scripted":
      if not u.script:
        raise ConfigError("env.settings.user.script: a scripted user needs its recorded turns")
      return ScriptedUser(read_script(u.script))
    tools = load_config(ToolSetConfig, toolset_path(u.toolset))  # its models only: no tool is built
    models = ModelCatalog.build(tools.models, tools.aliases)
    spec = models.resolve(u.model, "env.settings.user.model")
    return LLMUser(spec, u.retry, u.temperature, u.body)

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
    spec = _spec(task)
    initial, user_initial = self.initial_dbs(spec)
    user = None
    if self.user_model is not None:
      user = functools.partial(UserSide, spec.id, self.user_model, spec.user_scenario or {},
                               max_tool_steps=self.settings.user.max_tool_steps)
    return Tau2Episode(task, self.domain, self.system_prompt, initial, user_initial, user,
                       self.desk, (self.settings.max_steps, self.settings.max_errors))

  def gold_script(self, task: Task, grouped: bool = False) -> Script:
    script = (dialogue_script if self.settings.mode == "user" else gold_script)(_spec(task), grouped)
    if self.settings.gold_consult:
      script = consulting(script, CALL_EXPERT, {"expert": self.settings.gold_consult,
                                                "question": GOLD_QUESTION})
    return script

  def demonstrations(self, tasks: Sequence[Task], count: int, seed: int) -> list[dict[str, Any]]:
    """`count` gold conversations (the gold actions with the domain's real results; solo: then
    `done`; with a user: then what the gold says, and the user's answers), of tasks drawn at
    random: what a warm start imitates before RL."""
    rng = random.Random(seed)
    tasks = list(tasks)
    return [asyncio.run(self._gold_conversation(rng.choice(tasks))) for _ in range(count)]

  async def _gold_conversation(self, task: Task) -> dict[str, Any]:
    """The gold script played on a fresh episode, with each call's real result, up to the turn
    that ends the episode (`done`, a transfer, the user's stop)."""
    episode, script, context = self.start(task), self.gold_script(task), ToolContext()
    await episode.begin(context)
    messages, tools = episode.messages(), episode.tool_schemas()
    for _ in range(self.settings.max_steps):
      turn = script(messages, tools)
      messages.append(turn)
      calls = [ToolCall(c["name"], c["arguments"]) for c in turn["tool_calls"]]
      episode.observe(turn["content"], calls)
      if not calls:
        reply = await episode.reply(turn["content"], context)
        if reply is None or episode.done:
          break
        messages.append({"role": "user", "content": reply.text})
      for call in calls:
        result = await episode.execute(call, context)
        if result.error:
          raise ConfigError(f"task '{task.task_id}': gold action {call.name} failed:"
                            f" {result.error}")
        if episode.done:
          return {"messages": messages, "tools": tools}
        messages.append({"role": "tool", "content": result.text, "name": call.name})
      if episode.done:
        break
    return {"messages": messages, "tools": tools}


def _spec(task: Task) -> Tau2Task:
  if not isinstance(task.answer, Tau2Task):
    raise TypeError(f"task '{task.task_id}' is not a τ² task (its answer is not a Tau2Task)")
  return task.answer


def _unsupported(spec: Tau2Task, mode: str) -> str | None:
  if mode == "solo" and spec.ticket is None:
    return "no ticket: the request is only in the user simulator's instructions"
  if mode == "user" and not spec.user_scenario:
    return "no user_scenario: the simulated user would have no instructions"
  if spec.message_history:
    return f"initial_state.message_history: a prior conversation is not supported in {mode} mode"
  return None
