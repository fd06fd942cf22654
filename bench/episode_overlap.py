"""How well the episode loop overlaps tool latency with decoding, and how much of each episode's
context the engine prefills (a benchmark, not a test).

256 episodes on the tiny model through the in-process JetStream engine. Each turn the policy
really decodes (`--decode-tokens` tokens on the engine, sampled) and keeps them as the start of its
turn, then makes one scripted tool call whose latency is drawn from U(0.2, 2) s (seeded per episode
and turn); after `--tool-turns` such turns it answers. Reported:

- loop: wall time of all episodes through `run_groups` (tool calls and decoding overlap);
- sequential tools: the same decoding plus every tool call one after another
  (pure decode time + the sum of all tool latencies);
- ideal: max(pure decode time, the longest episode's total tool latency);
- pure decode: the same episodes with zero tool latency;
- prefilled tokens: prompt tokens the engine ran through prefills in the timed loop, against the
  episodes' final context lengths (deterministic: every sampled token is seeded). Each turn's
  prompt is the whole episode so far; with prefix reuse only what the last turn added is prefilled.

`--one-by-one` serves on the engine's path before issue 16 (one prompt per prefill, one decode
step per dispatch, attention over the whole cache, no prefix reuse) for a before/after comparison.

Run: `.venv/bin/python bench/episode_overlap.py [--episodes 256] [--one-by-one] [--out runs/bench]`
(needs the `serve` extra and JetStream, like the tests).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
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
  """Decodes for real on the engine and keeps those tokens (up to the first special one) as the
  start of its turn, then ends it with a scripted call (the random model calls no tool)."""

  def __init__(self, client, tokenizer, decode_tokens, tool_turns):
    self.client, self.tokenizer = client, tokenizer
    self.decode_tokens, self.tool_turns = decode_tokens, tool_turns
    self.special = set(tokenizer.special_ids().values()) | set(tokenizer.stop_ids)

  async def act(self, prompt_ids, messages, tools, max_tokens, episode_id=""):
    generation = await self.client.generate(list(prompt_ids), self.decode_tokens,
                                            SamplingParams(temperature=1.0, seed=len(prompt_ids)))
    kept = []
    for token in generation.token_ids:
      if token in self.special:
        break
      kept.append(token)
    done_turns = sum(m["role"] == "assistant" for m in messages)
    name = "expert" if done_turns < self.tool_turns else "answer"
    message = {"role": "assistant", "content": "", "tool_calls": [{"name": name, "arguments": {}}]}
    ids = kept + encode_assistant(self.tokenizer, message, True)
    return PolicyTurn(ids, [0.0] * len(ids), generation.versions[:1] * len(ids), TurnEnd.STOP)


def engine_config(args) -> EngineConfig:
  config = EngineConfig(max_slots=args.slots, max_prefill_length=MAX_CONTEXT,
                        max_cache_length=MAX_CONTEXT + args.decode_tokens,
                        prefix_store_rows=args.store_rows)
  return config.one_by_one() if args.one_by_one else config


MAX_CONTEXT = 1024


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--episodes", type=int, default=256)
  parser.add_argument("--tool-turns", type=int, default=3)
  parser.add_argument("--decode-tokens", type=int, default=32)
  parser.add_argument("--slots", type=int, default=32)
  parser.add_argument("--store-rows", type=int, default=32,
                      help="prefix store rows beside the slots (as the rollout keeps)")
  parser.add_argument("--one-by-one", action="store_true",
                      help="the engine's path before issue 16, for a before/after comparison")
  parser.add_argument("--out", default="runs/bench")
  args = parser.parse_args()

  with data_path("gsm8k/test.jsonl").open(encoding="utf-8") as lines:
    questions = [json.loads(line)["question"] for line in lines]
  out = Path(args.out)
  tokenizer = load_tokenizer(train_sentencepiece(questions, 512, out / "sp"))
  model = create_model(load_model_config("tiny").replace(vocab_size=tokenizer.vocab_size), seed=0)
  engine = Engine(model, tokenizer, engine_config(args))
  driver = Driver(engine)
  policy = DecodeThenCall(EngineClient(driver), tokenizer, args.decode_tokens, args.tool_turns)
  config = EpisodeConfig(max_turns=args.tool_turns + 2, max_context=MAX_CONTEXT,
                         concurrency=args.episodes)

  def timed(scale):
    env = SleepEnv(args.episodes, scale)
    start = time.perf_counter()
    trajectories = asyncio.run(run_groups(env, policy, env.tasks(), 1, tokenizer, config))
    assert all(t.outcome == 1.0 for t in trajectories)
    return time.perf_counter() - start, trajectories

  try:
    timed(0.0)  # compile
    pure_decode, _ = timed(0.0)
    before = dataclasses.replace(engine.stats)
    loop, trajectories = timed(1.0)
    stats = {f.name: getattr(engine.stats, f.name) - getattr(before, f.name)
             for f in dataclasses.fields(before)}
  finally:
    driver.stop()
  tool_total = sum(t.latency_s for t in trajectories)
  critical = max(t.latency_s for t in trajectories)
  result = {
      "episodes": args.episodes, "tool_turns": args.tool_turns, "decode_tokens_per_turn": args.decode_tokens,
      "slots": args.slots, "loop_s": loop, "pure_decode_s": pure_decode,
      "sequential_tools_s": pure_decode + tool_total, "ideal_s": max(pure_decode, critical),
      "sum_tool_latency_s": tool_total, "critical_path_tool_s": critical,
      "one_by_one": args.one_by_one, "store_rows": 0 if args.one_by_one else args.store_rows,
      "engine": stats,
      "final_context_tokens": sum(len(t.token_ids) for t in trajectories),
  }
  result["prefilled_over_final_context"] = stats["prefilled_tokens"] / result["final_context_tokens"]
  result["speedup_vs_sequential"] = result["sequential_tools_s"] / loop
  result["loop_over_ideal"] = loop / result["ideal_s"]
  out.mkdir(parents=True, exist_ok=True)
  (out / "episode_overlap.json").write_text(json.dumps(result, indent=2) + "\n")
  print(json.dumps(result, indent=2))


if __name__ == "__main__":
  main()
