"""A scripted environment for trainer tests: one free-text turn, scored by what it contains.

A random tiny model's replies differ from one sample to the next, so groups have reward variance
and GRPO has something to push on, with no tool protocol to learn first.
"""

import json
import pathlib

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


def write_guess_run(root, train: str, mesh: str = "") -> pathlib.Path:
  """The tiny GRPO run config on GuessEnv the trainer tests share, with a SentencePiece tokenizer
  trained on GSM8K's questions; `train` is the `train:` section's body, `mesh` one more line."""
  from toolorch_jax.datadir import data_path
  from toolorch_jax.tokenizer import train_sentencepiece

  with data_path("gsm8k/test.jsonl").open(encoding="utf-8") as lines:
    questions = [json.loads(line)["question"] for line in lines]
  tokenizer = train_sentencepiece(questions, 512, root / "tok")
  path = root / "run.yaml"
  path.write_text(f"""
model: {{preset: tiny, tokenizer: {tokenizer}}}
env: {{name: "tests.rl.guess_env:GuessEnv"}}
rewards: {{components: [{{name: outcome, weight: 1.0}}]}}
grpo: {{drop_invalid: false, kl_coef: 0.001}}
optim: {{learning_rate: 0.003}}
{mesh}
rollout: {{group_size: 4, tasks_per_step: 2, max_turns: 1, max_context: 192, max_new_tokens: 8,
           slots: 8, concurrency: 8, enable_thinking: false}}
train: {{{train}}}
""")
  return path
