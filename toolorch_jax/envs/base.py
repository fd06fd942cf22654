"""The environment contract: tasks, per-task episodes that offer tools, keep state and score, and
the optional abilities a run may ask of an environment.

An `Environment` lists tasks and starts an `Episode` per attempt. The episode gives the initial
messages (system prompt with the tool usage and the user's preference, then the user turn), the
tool schemas the policy is shown, executes tool calls (never raising: failures are `ToolResult`s
with `error`), sees each assistant turn, says when it has ended, and scores the outcome.
Environments know nothing of models or tokens: they speak in messages and tool calls.

Beyond tasks and episodes, an environment may offer the `Ability`s below, each a method of the
base class with one name across environments. A run checks at config load that the environment
has what the config asks for (`require`), so a missing one is a ConfigError naming the key, not an
AttributeError an hour into training.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
from typing import Any, Callable, ClassVar, Sequence

from toolorch_jax.config import ConfigError
from toolorch_jax.data.task import Preference, Task
from toolorch_jax.tools.base import ToolCall, ToolContext, ToolResult

# `(messages so far, tool schemas) -> the next assistant message`: a scripted policy.
Script = Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]


class Ability(enum.Enum):
  """Optional abilities; the value is the method that provides it."""

  DEMONSTRATIONS = "demonstrations"  # conversations for a supervised warm start
  # the same, with every choice of one decision, for a warm start chosen by the reward
  DEMONSTRATION_BRANCHES = "demonstration_branches"
  PROFILES = "profiles"  # named preference profiles, evaluated one by one in the report
  BASELINES = "baselines"  # fixed routings' accuracy and cost, for the report
  GOLD_POLICY = "gold_script"  # a replay of each task's gold solution (a self-check)
  DECISIONS = "decisions"  # a breakdown of the policy's decisions in a set of episodes, for the report


@dataclasses.dataclass
class Reply:
  """The environment's answer to an assistant turn without tool calls, such as a simulated user's
  next message, and what producing it cost (counted apart from the policy's own tool calls)."""

  text: str
  cost_usd: float = 0.0
  latency_s: float = 0.0


@dataclasses.dataclass
class Branches:
  """Demonstrations of one task that agree up to one decision and each take one of its choices
  there: what a warm start chosen by the reward plays and picks from (`rl.branch_selection`)."""

  task: Task
  demonstrations: list[dict[str, Any]]


class Episode(abc.ABC):
  """One attempt at one task."""

  def __init__(self, task: Task):
    self.task = task
    self.done = False  # set by the environment when the episode has ended (answer, transfer, ...)

  @abc.abstractmethod
  def messages(self) -> list[dict[str, Any]]:
    """The conversation the policy starts from (OpenAI-style messages)."""

  @abc.abstractmethod
  def tool_schemas(self) -> list[dict[str, Any]]:
    """OpenAI-style function specs of the tools the policy may call."""

  @abc.abstractmethod
  async def execute(self, call: ToolCall, context: ToolContext) -> ToolResult:
    """Runs one tool call; never raises."""

  def observe(self, content: str, tool_calls: Sequence[ToolCall]) -> None:
    """Sees each assistant turn (its text and calls) before the calls run, e.g. to end the
    episode on a final answer."""

  async def begin(self, context: ToolContext) -> Reply | None:
    """Runs once before `messages` is read, e.g. for a simulated user's opening message (which
    `messages` then holds); returns what that cost, or None when there is nothing to do."""
    return None

  async def reply(self, content: str, context: ToolContext) -> Reply | None:
    """Answers an assistant turn that has no tool calls: the next user message, appended to the
    conversation. None (the default): no one answers, and the episode ends on that turn."""
    return None

  @abc.abstractmethod
  def score(self) -> float:
    """Outcome score in [0, 1] once the episode has ended."""


class Environment(abc.ABC):
  """A source of tasks and episodes; chosen in YAML by registered name or `module:attr`."""

  name: ClassVar[str] = ""

  @abc.abstractmethod
  def tasks(self, split: str | None = None) -> Sequence[Task]:
    """The tasks of a split (`train`, `test`, ... as the environment defines; None: its default)."""

  @abc.abstractmethod
  def start(self, task: Task) -> Episode:
    """A fresh episode for `task` (its own state: databases are copied, never shared)."""

  def corpus(self) -> list[str]:
    """Texts a tokenizer for this environment should know beyond its prompts and demonstrations
    (e.g. tool results the policy will read); none by default."""
    return []

  def choices(self) -> list[str]:
    """The names a preference may weigh and the report's tool mix is over (tools, or the models
    a tool picks between); empty: every tool the policy calls."""
    return []

  def with_preference(self, tasks: Sequence[Task], preference: Preference) -> list[Task]:
    """The same tasks under one preference (evaluation per profile)."""
    return [dataclasses.replace(task, preference=preference) for task in tasks]

  # ----- optional abilities ----------------------------------------------------------------------

  def demonstrations(self, tasks: Sequence[Task], count: int, seed: int) -> list[dict[str, Any]]:
    """`count` conversations `{"messages": [...], "tools": [...]}` on `tasks` for a warm start."""
    raise self._lacks(Ability.DEMONSTRATIONS)

  def demonstration_branches(self, tasks: Sequence[Task], count: int, seed: int) -> list[Branches]:
    """`count` demonstrations like `demonstrations`', each with every choice of one of its
    decisions in place of the one drawn there (a single branch where nothing is decided). Tasks
    are drawn pass by pass, each once per pass: a task's best branch is the same every time."""
    raise self._lacks(Ability.DEMONSTRATION_BRANCHES)

  def profiles(self) -> Sequence[Preference]:
    """The named preference profiles tasks are drawn under."""
    raise self._lacks(Ability.PROFILES)

  def baselines(self, tasks: Sequence[Task], policy_costs: dict[str, float]) -> dict[str, Any]:
    """`{name: {"accuracy", "mean_cost_usd", "mean_latency_s"}}` of fixed routings on `tasks`; an
    entry may instead
    hold one such point per profile (a baseline at each profile's cost, `policy_costs`)."""
    raise self._lacks(Ability.BASELINES)

  def decisions(self, episodes: Sequence[Sequence[Any]]) -> dict[str, int]:
    """Counts of the policy's decisions over `episodes`, each one's call records in order (with
    `name`, `arguments`, `result`), e.g. how often a consulted answer was escalated. Counts, so
    that they add up over steps and processes: `"episodes"` is their number, a key
    `"<group>: <decision>"` counts out of its group's first key (say `"... usable: consults"`),
    any other key out of the episodes; the report divides (`rl.report.decision_shares`)."""
    raise self._lacks(Ability.DECISIONS)

  def gold_script(self, task: Task) -> Script:
    """A script replaying the task's gold solution, for `toolorch eval --policy gold`."""
    raise self._lacks(Ability.GOLD_POLICY)

  def abilities(self) -> frozenset[Ability]:
    """What this environment offers: the abilities its class implements. An environment whose
    settings take one away (a surface without gold answers) narrows this."""
    return frozenset(a for a in Ability
                     if getattr(type(self), a.value) is not getattr(Environment, a.value))

  def require(self, ability: Ability, key: str) -> None:
    """ConfigError naming `key` (what asked for it) when the environment lacks `ability`."""
    if ability not in self.abilities():
      has = ", ".join(sorted(a.value for a in self.abilities())) or "none"
      raise ConfigError(f"{key}: environment '{self.name or type(self).__name__}' has no"
                        f" {ability.value} (its abilities: {has})")

  def _lacks(self, ability: Ability) -> NotImplementedError:
    return NotImplementedError(f"environment '{self.name or type(self).__name__}' has no"
                               f" {ability.value}")
