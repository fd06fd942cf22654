"""A tool set as a person reads it (`toolorch tools list`): each tool's price, concurrency group,
description as the policy sees it, and arguments."""

from __future__ import annotations

from toolorch_jax.tools.base import Limits, Tool
from toolorch_jax.tools.registry import ToolSet

PRICE_UNITS = (("per_call", "call"), ("per_second", "second"),
               ("per_mtok_input", "M input tokens"), ("per_mtok_output", "M output tokens"))


def _picks_model(tool: Tool) -> bool:
  return "model" in tool.parameters.get("properties", {})


def _price(tool: Tool) -> str:
  parts = [f"${getattr(tool.price, field):g} per {unit}" for field, unit in PRICE_UNITS
           if getattr(tool.price, field)]
  if not parts and _picks_model(tool):
    return "priced per model (see the table)"
  return ", ".join(parts) or "free"


def _backend(tool: Tool, limits: Limits) -> str:
  if _picks_model(tool):
    return "concurrency limited per model backend"
  return f"backend {tool.backend}, at most {limits.cap(tool.backend)} at once"


def _arguments(tool: Tool) -> str:
  required = set(tool.parameters.get("required", []))
  return ", ".join(f"{name}{'*' if name in required else ''} ({spec.get('type', 'any')})"
                   for name, spec in tool.parameters.get("properties", {}).items()) or "none"


def describe_toolset(toolset: ToolSet) -> str:
  lines = []
  for name, tool in toolset.items():
    lines.append(f"{name}  [{type(tool).__name__}; {_price(tool)}; {_backend(tool, toolset.limits)}]")
    lines += [f"    {line}" for line in tool.description.splitlines()]
    lines.append(f"    arguments (* = required): {_arguments(tool)}")
  return "\n".join(lines)
