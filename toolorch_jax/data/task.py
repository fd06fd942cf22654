"""The records every layer above shares: a task, and the user preference it is played under."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping


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
class Task:
  task_id: str
  prompt: str  # what the user asks
  answer: Any = None  # gold answer or whatever the scorer needs
  metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
  preference: Preference | None = None
