"""The environment contract: tasks, and per-task episodes that offer tools, keep state and score.

An `Environment` lists tasks and starts an `EnvEpisode` per attempt. The episode gives the initial
messages (system prompt with the tool usage and the user's preference, then the user turn), the
tool schemas the policy is shown, executes tool calls (never raising: failures are `ToolResult`s
with `error`), watches each assistant turn, says when it has ended, and scores the outcome.
Environments know nothing of models or tokens.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
from typing import Any, Callable, ClassVar, Mapping, Sequence

from toolorch_jax.config import ConfigError
from toolorch_jax.tokenizer import ParsedAssistant, ToolCall
from toolorch_jax.tools.base import ToolContext, ToolResult


@dataclasses.dataclass(frozen=True)
class Preference:
  """ToolOrchestra's user preference: a weight per tool and weights on accuracy, cost and latency.

  `describe()` is how the prompt states it; the structured form goes into the trajectory, where
  the preference reward dots it with group-normalised features.
  """

  tools: Mapping[str, float] = dataclasses.field(default_factory=dict)
  accuracy: float = 1.0
  cost: float = 0.0
  latency: float = 0.0
  name: str = ""  # e.g. "accuracy first", "cost first"
  statement: str = ""  # how the user puts it, shown before the weights

  def describe(self) -> str:
    parts = []
    if self.accuracy:
      parts.append(f"accuracy (weight {self.accuracy:g})")
    if self.cost:
      parts.append(f"low cost (weight {self.cost:g})")
    if self.latency:
      parts.append(f"low latency (weight {self.latency:g})")
    text = "The user cares about " + (", ".join(parts) if parts else "nothing in particular") + "."
    liked = [f"{tool} (weight {w:g})" for tool, w in self.tools.items() if w]
    if liked:
      text += " Preferred tools: " + ", ".join(liked) + "."
    return f"{self.statement} {text}" if self.statement else text

  def to_dict(self) -> dict[str, Any]:
    return {"name": self.name, "tools": dict(self.tools), "accuracy": self.accuracy,
            "cost": self.cost, "latency": self.latency, "statement": self.statement}


@dataclasses.dataclass
class ProfileConfig:
  """A preference profile as configured in YAML (ToolOrchestra's preference vector, named)."""

  name: str = ""
  accuracy: float = 1.0
  cost: float = 0.0
  latency: float = 0.0
  tools: dict[str, float] = dataclasses.field(default_factory=dict)  # per tool or expert alias
  statement: str = ""  # the user's own words for it, stated in the prompt
  share: float = 1.0  # how often tasks get this profile, relative to the other profiles

  def preference(self) -> Preference:
    return Preference(tools=dict(self.tools), accuracy=self.accuracy, cost=self.cost,
                      latency=self.latency, name=self.name, statement=self.statement)


def stable_unit(key: str) -> float:
  """A number in [0, 1) fixed by `key` alone: the same in every process and on every machine,
  for splits and per-task draws that adding tasks does not reshuffle."""
  return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") / 2 ** 64


@dataclasses.dataclass(frozen=True)
class PreferenceDraw:
  """Checked preference profiles, one drawn per task id in proportion to its share: the same for
  every episode of the task's group and every rerun, and adding tasks does not reshuffle others."""

  preferences: tuple[Preference, ...]
  shares: tuple[float, ...]

  @classmethod
  def from_profiles(cls, profiles: Sequence[ProfileConfig], choices: set[str], key: str) -> "PreferenceDraw":
    """Checks each profile (`key` names it in errors): weights >= 0, share > 0, and a tool weight
    must name a tool or model the policy can choose."""
    for i, profile in enumerate(profiles):
      where = f"{key}[{i}]"
      weights = {"accuracy": profile.accuracy, "cost": profile.cost, "latency": profile.latency}
      weights |= {f"tools.{name}": w for name, w in profile.tools.items()}
      for field, weight in weights.items():
        if weight < 0:
          raise ConfigError(f"{where}.{field}: weights must be >= 0, got {weight:g}")
      if not profile.share > 0:
        raise ConfigError(f"{where}.share must be positive, got {profile.share:g}")
      for name in profile.tools:
        if name not in choices:
          raise ConfigError(f"{where}.tools.{name}: not a tool or model the policy can choose"
                            f" (choices: {', '.join(sorted(choices))})")
    return cls(tuple(p.preference() for p in profiles), tuple(p.share for p in profiles))

  def for_task(self, task_id: str) -> Preference | None:
    """The task's preference; None when no profile is configured."""
    if not self.preferences:
      return None
    point = stable_unit(f"preference:{task_id}") * sum(self.shares)
    for preference, share in zip(self.preferences, self.shares):
      if point < share:
        return preference
      point -= share
    return self.preferences[-1]


def in_split(task_id: str, split: str, test_fraction: float) -> bool:
  """Whether a task belongs to `split` (train, test or all), held out by a hash of its id."""
  if split == "all":
    return True
  return (stable_unit(f"split:{task_id}") < test_fraction) == (split == "test")


@dataclasses.dataclass
class Task:
  task_id: str
  prompt: str  # what the user asks
  answer: Any = None  # gold answer or whatever the scorer needs
  metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
  preference: Preference | None = None


class EnvEpisode(abc.ABC):
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

  def observe(self, parsed: ParsedAssistant) -> None:
    """Sees each assistant turn before its tool calls run (e.g. to end on a final answer)."""

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
  def start(self, task: Task) -> EnvEpisode:
    """A fresh episode for `task` (its own state: databases are copied, never shared)."""

  def corpus(self) -> list[str]:
    """Texts to train a tokenizer for this environment on (default: the task prompts)."""
    return [t.prompt for t in self.tasks()]

  def gold_script(self, task: Task) -> Callable[[list, list], dict[str, Any]]:
    """`(messages, tools) -> next assistant message` replaying the task's gold solution, for
    `toolorch eval --policy gold` (a self-check of the environment). Not every environment has one."""
    raise NotImplementedError(f"environment '{self.name or type(self).__name__}' has no gold policy")
