"""What a QA surface is: the tools the policy is shown, bound to one episode, and how to use them.

Every surface ends with `answer`, whose result carries the answer to grade in
`metadata["prediction"]`; the episode grades it, so surfaces know nothing of the gold.
"""

from __future__ import annotations

from typing import Mapping, Protocol

from toolorch_jax.config import ConfigError
from toolorch_jax.tools.base import Tool

FINAL = "answer"


class Surface(Protocol):
  instructions: str  # the system prompt's account of the tools

  def bind(self, question: str) -> dict[str, Tool]:
    """The tools of one episode by the name the policy calls (fresh state per episode)."""

  def choices(self) -> set[str]:
    """Names a preference may weigh: the tools, and the models the policy can pick."""


def require_tool(tools: Mapping[str, Tool], name: str, key: str) -> Tool:
  """`tools[name]`, or a ConfigError naming the settings key and the tools there are."""
  if name not in tools:
    raise ConfigError(f"{key}: the tool set has no tool '{name}' (tools: {', '.join(tools)})")
  return tools[name]


def expert_models(expert: Tool, key: str) -> list[str]:
  """The models an expert tool offers (its `model` enum); it must also take a `prompt`."""
  properties = expert.parameters.get("properties", {})
  models = properties.get("model", {}).get("enum")
  if not models or "prompt" not in properties:
    raise ConfigError(f"{key}: tool '{expert.name}' is not an expert: it needs a 'model' argument"
                      " with a list of choices and a 'prompt' (types llm_expert, recorded_expert)")
  return list(models)
