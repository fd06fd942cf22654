"""How well the episode loop overlaps tool latency with decoding (a benchmark, not a test).

256 episodes on the tiny model through the in-process JetStream engine. Each turn the policy
really decodes (`--decode-tokens` tokens on the engine) and then makes one scripted tool call
whose latency is drawn from U(0.2, 2) s (seeded per episode and turn); after `--tool-turns` such
turns it answers. Reported:

- loop: wall time of all episodes through `run_groups` (tool calls and decoding overlap);
- sequential tools: the same decoding plus every tool call one after another
  (pure decode time + the sum of all tool latencies);
- ideal: max(pure decode time, the longest episode's total tool latency);
- pure decode: the same episodes with zero tool latency.

Run: `.venv/bin/python bench/episode_overlap.py [--episodes 256] [--out runs/bench]`
(needs the `serve` extra and JetStream, like the tests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from pathlib import Path

from toolorch_jax.rollout import EpisodeConfig, PolicyTurn, TurnEnd, run_groups
from toolorch_jax.rollout.policy import encode_assistant
from toolorch_jax.datadir import data_path
from toolorch_jax.data import Task
from toolorch_jax.envs import Environment, Episode
from toolorch_jax.model import create_model, load_model_config
from toolorch_jax.serving import Driver, Engine, EngineClient, EngineConfig, SamplingParams
from toolorch_jax.tokenizer import load_tokenizer, train_sentencepiece
from toolorch_jax.tools.base import ToolResult


def latency(task_id: str, turn: int, scale: float) -> float:
  return scale * random.Random(f"{task_id}/{turn}").uniform(0.2, 2.0)


class SleepEpisode(Episode):
  def __init__(self, task, scale):
    super().__init__(task)
    self.scale = scale
    self.turn = 0

  def messages(self):
    return [{"role": "user", "content": self.task.prompt}]

  def tool_schemas(self):
    return [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
            for name in ("expert", "answer")]

  async def execute(self, call, context):
    if call.name == "answer":
      self.done = True
      return ToolResult(text="ok")
    seconds = latency(self.task.task_id, self.turn, self.scale)
    self.turn += 1
    await asyncio.sleep(seconds)
    return ToolResult(text="expert says 42", latency_s=seconds)

  def score(self):
    return float(self.done)


class SleepEnv(Environment):
  def __init__(self, episodes, scale):
    self.episodes, self.scale = episodes, scale

  def tasks(self, split="train"):
    return [Task(f"task-{i:03d}", f"Question number {i}?") for i in range(self.episodes)]

  def start(self, task):
    return SleepEpisode(task, self.scale)


class DecodeThenCall:
  """Decodes for real on the engine, then takes a scripted turn (the random model calls no tool)."""

  def __init__(self, client, tokenizer, decode_tokens, tool_turns):
    self.client, self.tokenizer = client, tokenizer
    self.decode_tokens, self.tool_turns = decode_tokens, tool_turns

  async def act(self, prompt_ids, messages, tools, max_tokens, episode_id=""):
    generation = await self.client.generate(list(prompt_ids)[-256:], self.decode_tokens,
                                            SamplingParams(temperature=1.0, seed=len(prompt_ids)))
    done_turns = sum(m["role"] == "assistant" for m in messages)
    name = "expert" if done_turns < self.tool_turns else "answer"
    message = {"role": "assistant", "content": "", "tool_calls": [{"name": name, "arguments": {}}]}
    ids = encode_assistant(self.tokenizer, message, True)
    return PolicyTurn(ids, [0.0] * len(ids), generation.versions[:1] * len(ids), TurnEnd.STOP)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--episodes", type=int, default=256)
  parser.add_argument("--tool-turns", type=int, default=2)
  parser.add_argument("--decode-tokens", type=int, default=32)
  parser.add_argument("--slots", type=int, default=32)
  parser.add_argument("--out", default="runs/bench")
  args = parser.parse_args()

  with data_path("gsm8k/test.jsonl").open(encoding="utf-8") as lines:
    questions = [json.loads(line)["question"] for line in lines]
  out = Path(args.out)
  tokenizer = load_tokenizer(train_sentencepiece(questions, 512, out / "sp"))
  model = create_model(load_model_config("tiny").replace(vocab_size=tokenizer.vocab_size), seed=0)
  driver = Driver(Engine(model, tokenizer, EngineConfig(max_slots=args.slots, max_prefill_length=256,
                                                        max_cache_length=256 + args.decode_tokens)))
  policy = DecodeThenCall(EngineClient(driver), tokenizer, args.decode_tokens, args.tool_turns)
  config = EpisodeConfig(max_turns=args.tool_turns + 2, max_context=4096, concurrency=args.episodes)

  def timed(scale):
    env = SleepEnv(args.episodes, scale)
    start = time.perf_counter()
    trajectories = asyncio.run(run_groups(env, policy, env.tasks(), 1, tokenizer, config))
    assert all(t.outcome == 1.0 for t in trajectories)
    return time.perf_counter() - start, trajectories

  try:
    timed(0.0)  # compile
    pure_decode, _ = timed(0.0)
    loop, trajectories = timed(1.0)
  finally:
    driver.stop()
  tool_total = sum(t.latency_s for t in trajectories)
  critical = max(t.latency_s for t in trajectories)
  result = {
      "episodes": args.episodes, "tool_turns": args.tool_turns, "decode_tokens_per_turn": args.decode_tokens,
      "slots": args.slots, "loop_s": loop, "pure_decode_s": pure_decode,
      "sequential_tools_s": pure_decode + tool_total, "ideal_s": max(pure_decode, critical),
      "sum_tool_latency_s": tool_total, "critical_path_tool_s": critical,
  }
  result["speedup_vs_sequential"] = result["sequential_tools_s"] / loop
  result["loop_over_ideal"] = loop / result["ideal_s"]
  out.mkdir(parents=True, exist_ok=True)
  (out / "episode_overlap.json").write_text(json.dumps(result, indent=2) + "\n")
  print(json.dumps(result, indent=2))


if __name__ == "__main__":
  main()
