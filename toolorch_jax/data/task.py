"""The records every layer above shares: a task, and the user preference it is played under."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping


@dataclasses.dataclass(frozen=True)
class Preference:
  """ToolOrchestra's user preference: a weight per tool and weights on accuracy, cost and latency.

  `describe()` is how the prompt states it; the structured form goes into the trajectory, where
  the preference reward dots it with group-normalised features. `utility` scores the same weights
  on a fixed scale instead: cost and latency in units the environment measures once (the spread
  between its always-strong and always-weak routings), so a policy's score never depends on which
  other episodes sit beside it.
  """

  tools: Mapping[str, float] = dataclasses.field(default_factory=dict)
  accuracy: float = 1.0
  cost: float = 0.0
  latency: float = 0.0
  name: str = ""  # e.g. "accuracy first", "cost first"
  statement: str = ""  # how the user puts it, shown before the weights
  cost_unit: float = 1.0  # USD that count as one unit of cost in `utility`
  latency_unit: float = 1.0  # seconds that count as one unit of latency in `utility`

  def __post_init__(self):
    if not (self.cost_unit > 0 and self.latency_unit > 0):
      raise ValueError(f"preference '{self.name}': cost_unit and latency_unit must be positive")

  @classmethod
  def from_dict(cls, data: Mapping[str, Any]) -> "Preference":
    return cls(**data)

  def utility(self, accuracy: float, cost_usd: float, latency_s: float) -> float:
    """accuracy x its weight, minus cost and latency in units x their weights. Linear, so the
    utility of mean accuracy, cost and latency is the mean utility of the episodes. Tool weights
    are not part of it: they name a means, not an end."""
    return (self.accuracy * accuracy - self.cost * cost_usd / self.cost_unit
            - self.latency * latency_s / self.latency_unit)

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
            "cost": self.cost, "latency": self.latency, "statement": self.statement,
            "cost_unit": self.cost_unit, "latency_unit": self.latency_unit}


@dataclasses.dataclass
class Task:
  task_id: str
  prompt: str  # what the user asks
  answer: Any = None  # gold answer or whatever the scorer needs
  metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
  preference: Preference | None = None
