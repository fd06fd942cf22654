"""A scripted environment for trainer tests: one free-text turn, scored by what it contains.

A random tiny model's replies differ from one sample to the next, so groups have reward variance
and GRPO has something to push on, with no tool protocol to learn first.
"""

from toolorch_jax.data import Preference, Task
from toolorch_jax.envs import Environment, Episode
from toolorch_jax.tools.base import ToolResult


class GuessEpisode(Episode):
  def __init__(self, task):
    super().__init__(task)
    self.reply = ""

  def messages(self):
    return [{"role": "system", "content": "Reply with one short word."},
            {"role": "user", "content": self.task.prompt}]

  def tool_schemas(self):
    return []

  async def execute(self, call, context):
    return ToolResult(error="this environment has no tools")

  def observe(self, content, tool_calls):
    self.reply, self.done = content, True

  def score(self):
    return float("e" in self.reply)


class GuessEnv(Environment):
  name = "guess"

  def tasks(self, split=None):
    return [Task(f"q{i}", f"Question {i}: name a thing.", preference=Preference(accuracy=1.0))
            for i in range(6)]

  def start(self, task):
    return GuessEpisode(task)
