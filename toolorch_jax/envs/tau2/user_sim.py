"""τ²'s simulated user: a model (or a script) playing the customer, with its own tools.

The user sees only what a customer would: the agent's words and the results of its own tool calls
(telecom's phone), never the agent's calls. It follows τ²'s guidelines (the data directory's
`tau2/user_simulator/`: one step at a time, reveal only what is asked) and the task's
`user_scenario`, and ends the conversation with a stop token. Seen from the simulator's side the
roles are swapped: the agent's words are its `user` turns, its own messages its `assistant` turns.

A failure on the user's side (an endpoint that refuses, times out or answers with no message, a
script that is out of turns) is a `UserReply` with `error` set: the episode ends prematurely on it,
nothing raises.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any, Mapping, Protocol, Sequence

from omegaconf import OmegaConf

from toolorch_jax.config import ConfigError, config_dir, read_yaml
from toolorch_jax.datadir import data_file
from toolorch_jax.envs.tau2.toolkit import Sides
from toolorch_jax.tools.base import ToolCall, ToolError
from toolorch_jax.tools.catalog import ModelSpec
from toolorch_jax.tools.http_retry import RetryPolicy
from toolorch_jax.tools.llm_expert import complete

STOP, TRANSFER, OUT_OF_SCOPE = "###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"
STOP_TOKENS = (STOP, TRANSFER, OUT_OF_SCOPE)
GREETING = "Hi! How can I help you today?"  # the agent's first message, as in τ²
GUIDELINES = "tau2/user_simulator/simulation_guidelines.md"
GUIDELINES_WITH_TOOLS = "tau2/user_simulator/simulation_guidelines_tools.md"


def stop_token(text: str) -> str | None:
  """The first stop token in `text`, if any."""
  return next((token for token in STOP_TOKENS if token in text), None)


def render_scenario(scenario: Mapping[str, Any]) -> str:
  """A task's `user_scenario` as the simulator reads it: persona, then the instructions (a string,
  or τ²'s object of domain, reason for call, known and unknown info, task instructions)."""
  parts = []
  if scenario.get("persona"):
    parts.append(f"Persona:\n{scenario['persona']}")
  instructions = scenario.get("instructions")
  if isinstance(instructions, Mapping):
    fields = [(key.replace("_", " ").capitalize(), instructions.get(key))
              for key in ("domain", "reason_for_call", "known_info", "unknown_info",
                          "task_instructions")]
    instructions = "\n".join(f"{label}:\n{value}" for label, value in fields if value)
  if instructions:
    parts.append(f"Instructions:\n{instructions}")
  return "\n\n".join(parts)


def system_prompt(scenario: Mapping[str, Any], with_tools: bool) -> str:
  guidelines = data_file(GUIDELINES_WITH_TOOLS if with_tools else GUIDELINES, "env.settings.user")
  return (f"{guidelines.read_text(encoding='utf-8').strip()}\n\n<scenario>\n"
          f"{render_scenario(scenario)}\n</scenario>")


@dataclasses.dataclass
class UserStep:
  """One step of the user model: a message, or tool calls on the user's side; or a failure."""

  content: str = ""
  tool_calls: list[ToolCall] = dataclasses.field(default_factory=list)
  cost_usd: float = 0.0
  latency_s: float = 0.0
  error: str | None = None


class UserModel(Protocol):
  async def step(self, task_id: str, messages: list[dict[str, Any]],
                 tools: list[dict[str, Any]]) -> UserStep:
    """The user's next step from its view of the conversation (roles swapped, see above)."""


def _tool_calls(message: Mapping[str, Any]) -> list[ToolCall]:
  """The tool calls of an OpenAI reply message; ValueError for one that is not well-formed."""
  calls = []
  for raw in message.get("tool_calls") or ():
    function = raw.get("function") if isinstance(raw, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
      raise ValueError(f"tool call without a function name: {raw!r}"[:200])
    arguments = function.get("arguments") or {}
    if isinstance(arguments, str):
      try:
        arguments = json.loads(arguments or "{}")
      except json.JSONDecodeError as err:
        raise ValueError(f"tool call '{function['name']}': arguments are not JSON ({err})") from None
    calls.append(ToolCall(function["name"], arguments))
  return calls


class LLMUser:
  """The user played by a model behind any OpenAI-compatible endpoint, through the experts' client
  (`tools.llm_expert.complete`: API key, bounded retries and timeouts, cost by reported usage)."""

  def __init__(self, spec: ModelSpec, retry: RetryPolicy, temperature: float | None = None,
               body: Mapping[str, Any] | None = None):
    if not spec.base_url:
      raise ConfigError(f"env.settings.user.model: model '{spec.model}' has no base_url")
    self.spec, self.retry, self.temperature, self.body = spec, retry, temperature, dict(body or {})

  async def step(self, task_id, messages, tools) -> UserStep:
    payload: dict[str, Any] = {"messages": messages, **self.body}
    if tools:
      payload["tools"] = tools
    if self.temperature is not None:
      payload["temperature"] = self.temperature
    start = time.perf_counter()
    try:
      done = await complete(self.spec, payload, self.retry)
    except ToolError as err:
      return UserStep(cost_usd=err.cost_usd, latency_s=time.perf_counter() - start,
                      error=f"user simulator: {err}")
    latency = time.perf_counter() - start
    try:
      calls = _tool_calls(done.message)
    except ValueError as err:
      return UserStep(cost_usd=done.cost_usd, latency_s=latency,
                      error=f"user simulator: malformed reply: {err}")
    content = done.message["content"].strip()  # beside tool calls, unseen by the agent anyway
    if not calls and not content:
      return UserStep(cost_usd=done.cost_usd, latency_s=latency,
                      error="user simulator: malformed reply: neither a message nor a tool call")
    return UserStep(content, calls, done.cost_usd, latency)


class ScriptedUser:
  """Recorded user turns per task, replayed in order whatever the agent says (tests, offline runs).

  A turn is `{"content": "..."}` or `{"tool_calls": [{"name": ..., "arguments": {...}}]}`; a task
  whose turns are spent says `###STOP###`. `turns` maps task ids to their turns.
  """

  def __init__(self, turns: Mapping[str, Sequence[Mapping[str, Any]]]):
    self.turns = turns

  async def step(self, task_id, messages, tools) -> UserStep:
    if task_id not in self.turns:
      return UserStep(error=f"scripted user: no recorded turns for task '{task_id}'")
    index = sum(m["role"] == "assistant" for m in messages)  # the user's own turns so far
    script = self.turns[task_id]
    if index >= len(script):
      return UserStep(STOP)
    turn = script[index]
    return UserStep(turn.get("content", ""), [ToolCall(c["name"], dict(c.get("arguments") or {}))
                                              for c in turn.get("tool_calls") or ()])


def gold_turns(scenario: Mapping[str, Any] | None, user_actions: Sequence[tuple[str, Any]]
               ) -> list[dict[str, Any]]:
  """The turns of a task's gold user: its request (the reason for the call and what it knows, or
  the plain instructions), then the gold actions the task assigns the user, one per turn (then, as
  every scripted user, ###STOP###). A self-check of domains where the user must act (telecom)."""
  instructions = (scenario or {}).get("instructions")
  if isinstance(instructions, Mapping):
    opening = "\n".join(str(instructions[key]) for key in ("reason_for_call", "known_info")
                        if instructions.get(key))
  else:
    opening = str(instructions or "")
  return [{"content": opening}, *({"tool_calls": [{"name": name, "arguments": dict(arguments)}]}
                                  for name, arguments in user_actions)]


def read_script(path: str) -> dict[str, list[dict[str, Any]]]:
  """A recorded-user file (YAML or JSON): task id -> list of turns; errors name the entry. `path`
  is a name in configs/users/, an absolute path, or a path in the data directory."""
  preset = config_dir() / "users" / f"{path}.yaml"
  found = preset if preset.is_file() else data_file(path, "env.settings.user.script")
  raw = OmegaConf.to_container(read_yaml(found))
  if not isinstance(raw, Mapping):
    raise ConfigError(f"{found}: expected a mapping of task id -> list of turns")
  for task_id, turns in raw.items():
    if not isinstance(turns, list):
      raise ConfigError(f"{found}: '{task_id}': expected a list of turns")
    for i, turn in enumerate(turns):
      where = f"{found}: '{task_id}'[{i}]"
      if not isinstance(turn, Mapping) or set(turn) - {"content", "tool_calls"} or not turn:
        raise ConfigError(f"{where}: a turn is {{content: ...}} or {{tool_calls: [...]}}")
      for j, call in enumerate(turn.get("tool_calls") or ()):
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
          raise ConfigError(f"{where}.tool_calls[{j}]: needs a 'name'")
  return {str(task_id): list(turns) for task_id, turns in raw.items()}


@dataclasses.dataclass
class UserReply:
  """What the user said back (its tool calls ran on its side, unseen by the agent)."""

  text: str
  cost_usd: float = 0.0
  latency_s: float = 0.0
  stop: str | None = None  # the stop token that ended the conversation
  error: str | None = None  # a failure on the user's side: the episode ends prematurely
  steps: int = 0  # messages on the user's side: its tool calls, their results, its message
  tool_errors: int = 0


class UserSide:
  """One episode's user: its view of the conversation, its tools on its own database, its calls.

  `max_tool_steps` bounds the tool calls the user may make before it says something. The user's
  tools are the episode's `sides`' (each call then syncs the two sides); `order` is the episode's
  record of whose each domain call was.
  """

  def __init__(self, task_id: str, model: UserModel, scenario: Mapping[str, Any], sides: Sides,
               order: list[str], max_tool_steps: int = 10):
    self.task_id, self.model, self.sides, self.order = task_id, model, sides, order
    self.tools = sides.tools["user"]
    self.max_tool_steps = max_tool_steps
    self.messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(scenario, bool(self.tools))}]
    self.schemas = [tool.schema() for tool in self.tools.values()]
    self.calls: list[tuple[str, Any]] = []  # the user's tool calls in order, failed ones included
    self.sent = 0  # tool calls asked for, unknown tools included: their ids in the conversation

  async def respond(self, agent_text: str) -> UserReply:
    """The user's answer to what the agent said, after any tool calls on the user's side."""
    self.messages.append({"role": "user", "content": agent_text})
    reply = UserReply("")
    for _ in range(self.max_tool_steps + 1):
      step = await self.model.step(self.task_id, self.messages, self.schemas)
      reply.cost_usd += step.cost_usd
      reply.latency_s += step.latency_s
      if step.error:
        reply.error = step.error
        return reply
      if not step.tool_calls:
        self.messages.append({"role": "assistant", "content": step.content})
        reply.text, reply.stop, reply.steps = step.content, stop_token(step.content), reply.steps + 1
        return reply
      self._run(step.tool_calls, reply)
    reply.error = f"user simulator: more than {self.max_tool_steps} tool calls without a message"
    return reply

  def _run(self, calls: Sequence[ToolCall], reply: UserReply) -> None:
    ids = [f"user-call-{self.sent + i}" for i in range(len(calls))]
    self.sent += len(calls)
    self.messages.append({"role": "assistant", "content": "", "tool_calls": [
        {"id": i, "type": "function", "function": {"name": c.name,
                                                   "arguments": json.dumps(c.arguments)}}
        for i, c in zip(ids, calls)]})
    for call_id, call in zip(ids, calls):
      tool = self.tools.get(call.name)
      if tool is None:
        text = f"Error: unknown tool {call.name!r}; available: {sorted(self.tools)}"
        reply.tool_errors += 1
      else:
        self.calls.append((call.name, call.arguments))
        self.order.append("user")
        outcome = self.sides.call("user", call.name, call.arguments)
        reply.tool_errors += outcome.error
        text = outcome.text
      self.messages.append({"role": "tool", "tool_call_id": call_id, "name": call.name,
                            "content": text})
    reply.steps += 2 * len(calls)
