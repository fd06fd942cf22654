"""The record of one episode: what RL trains on and what evaluation reports."""

from __future__ import annotations

import collections
import dataclasses
import enum
import json
from typing import Any


NOT_GENERATED = -1  # the policy version of a token the policy did not produce (prompt, tool results)


class EpisodeEnd(enum.StrEnum):
  """Why an episode ended."""

  ENV = "env"  # the environment ended it: an answer, `done`, a transfer
  NO_TOOL_CALL = "no_tool_call"  # a turn without a tool call, which the environment did not end on
  MAX_TURNS = "max_turns"
  CONTEXT = "context"  # no room left in the context budget for another turn
  TRUNCATED = "truncated"  # a turn was cut at its token budget
  POLICY_ERROR = "policy_error"  # the policy failed to produce a turn


class TurnEnd(enum.StrEnum):
  """How the policy's generation of one turn ended."""

  STOP = "stop"  # closed with <|im_end|>
  LENGTH = "length"  # cut at the token budget
  ERROR = "error"


@dataclasses.dataclass
class ToolCallRecord:
  turn: int
  name: str
  arguments: Any
  result: str
  error: str | None
  cost_usd: float
  latency_s: float
  metadata: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Turn:
  assistant: str  # the policy's text for this turn (special tokens removed)
  reasoning: str | None
  content: str
  observations: list[str]  # tool responses shown to the policy after this turn
  parse_errors: list[dict[str, str]]
  finish_reason: TurnEnd | None
  user: str | None = None  # the user's reply to this turn (an environment with a simulated user)


@dataclasses.dataclass
class Trajectory:
  task_id: str
  group_id: int
  episode_id: str
  token_ids: list[int] = dataclasses.field(default_factory=list)  # exactly what the policy saw and produced
  loss_mask: list[int] = dataclasses.field(default_factory=list)  # 1 on policy tokens only
  logprobs: list[float] = dataclasses.field(default_factory=list)  # sampling log-probs, 0 off-policy
  prompt_length: int = 0
  turns: list[Turn] = dataclasses.field(default_factory=list)
  calls: list[ToolCallRecord] = dataclasses.field(default_factory=list)
  outcome: float = 0.0
  finish: EpisodeEnd | None = None  # set when the episode has ended
  preference: dict[str, Any] | None = None
  policy_versions: list[int] = dataclasses.field(default_factory=list)  # those of token_versions
  token_versions: list[int] = dataclasses.field(default_factory=list)  # per token, NOT_GENERATED off-policy
  faults: dict[str, int] = dataclasses.field(default_factory=dict)  # kind -> count
  wall_s: float = 0.0
  user_cost_usd: float = 0.0  # a simulated user's cost, apart from the policy's tool calls
  user_latency_s: float = 0.0

  @property
  def cost_usd(self) -> float:
    return sum(c.cost_usd for c in self.calls)

  @property
  def latency_s(self) -> float:
    """Tool latency as ToolOrchestra counts it: the sum over calls."""
    return sum(c.latency_s for c in self.calls)

  @property
  def tool_counts(self) -> dict[str, int]:
    """Calls per tool, or per expert where a tool says whom the call counts as (`counts_as`;
    None for a step that uses no tool, such as submitting an answer already paid for)."""
    names = (c.metadata.get("counts_as", c.name) for c in self.calls)
    return dict(collections.Counter(name for name in names if name is not None))

  def count_fault(self, kind: str) -> None:
    self.faults[kind] = self.faults.get(kind, 0) + 1

  def to_dict(self) -> dict[str, Any]:
    data = dataclasses.asdict(self)
    data.update(cost_usd=self.cost_usd, latency_s=self.latency_s, tool_counts=self.tool_counts)
    return data

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), ensure_ascii=False)

  @classmethod
  def from_dict(cls, data: dict[str, Any]) -> "Trajectory":
    data = {k: v for k, v in data.items() if k not in ("cost_usd", "latency_s", "tool_counts")}
    data["turns"] = [Turn(**{**t, "finish_reason": t["finish_reason"] and TurnEnd(t["finish_reason"])})
                     for t in data.get("turns", [])]
    data["calls"] = [ToolCallRecord(**c) for c in data.get("calls", [])]
    data["finish"] = data.get("finish") and EpisodeEnd(data["finish"])
    return cls(**data)
