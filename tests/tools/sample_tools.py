"""A user's own tools, for the registry tests to load by `module:attr` from YAML."""

import asyncio
import dataclasses

from toolorch_jax.tools import Tool, ToolResult


@dataclasses.dataclass
class EchoSettings:
  prefix: str = ""
  repeat: int = 1


class Echo(Tool):
  Settings = EchoSettings
  description = "Echo the text back."
  parameters = {"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"], "additionalProperties": False}

  async def run(self, arguments, context):
    return ToolResult(text=self.settings.prefix + arguments["text"] * self.settings.repeat,
                      cost_usd=self.price.cost())


class Broken(Echo):
  async def run(self, arguments, context):
    raise RuntimeError("boom")


class Slow(Echo):
  """Sleeps, counting how many calls are in flight at once."""

  in_flight = 0
  most = 0

  async def run(self, arguments, context):
    Slow.in_flight += 1
    Slow.most = max(Slow.most, Slow.in_flight)
    try:
      await asyncio.sleep(0.05)
    finally:
      Slow.in_flight -= 1
    return ToolResult(text="done")


class BadSchema(Echo):
  parameters = {"type": "objekt"}


class Fussy(Echo):
  def __init__(self, *args, **kwargs):
    raise ValueError("needs a licence file")


NOT_A_TOOL = 42
