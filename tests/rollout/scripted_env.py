"""A small environment for loop tests: a key-value lookup tool with a price, and `answer`."""

import asyncio

from toolorch_jax.data import Preference, Task
from toolorch_jax.envs import Environment, Episode
from toolorch_jax.tools.base import Tool, ToolContext, ToolError, ToolResult
from toolorch_jax.tools.pricing import Price

FACTS = {"capital_fr": "Paris", "capital_jp": "Tokyo", "river_fr": "Seine"}


class Lookup(Tool):
  description = "Look up a fact by key."
  parameters = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}

  def __init__(self, delay_s: float = 0.0):
    super().__init__("lookup", price=Price(per_call=0.01))
    self.delay_s = delay_s

  async def run(self, arguments, context):
    await asyncio.sleep(self.delay_s)
    if arguments["key"] not in FACTS:
      raise ToolError(f"no fact named {arguments['key']!r}")
    return ToolResult(text=FACTS[arguments["key"]], cost_usd=self.price.per_call)


class KeyValueEpisode(Episode):
  def __init__(self, task: Task, lookup: Tool):
    super().__init__(task)
    self.lookup = lookup
    self.final = None

  def messages(self):
    return [{"role": "system", "content": "Use tools. " + self.task.preference.describe()},
            {"role": "user", "content": self.task.prompt}]

  def tool_schemas(self):
    answer = {"type": "function", "function": {"name": "answer", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
    return [self.lookup.schema(), answer]

  async def execute(self, call, context: ToolContext) -> ToolResult:
    if call.name == "answer":
      self.final = str(call.arguments.get("text"))
      self.done = True
      return ToolResult(text="answer recorded")
    if call.name == "lookup":
      return await self.lookup.call(call.arguments, context)
    return ToolResult(error=f"unknown tool {call.name!r}")

  def score(self) -> float:
    return float(self.done and self.final == self.task.answer)


class KeyValueEnv(Environment):
  name = "key_value"

  def __init__(self, delay_s: float = 0.0):
    self.lookup = Lookup(delay_s)

  def tasks(self, split="train"):
    pref = Preference(tools={"lookup": 1.0}, accuracy=1.0, cost=0.5, name="balanced")
    return [Task("t-fr", "Capital of France?", "Paris", preference=pref),
            Task("t-jp", "Capital of Japan?", "Tokyo", preference=pref)]

  def start(self, task):
    return KeyValueEpisode(task, self.lookup)
