"""Steps per hour of GRPO with rollouts one step ahead of the update (`grpo.max_staleness: 1`,
on one engine or on two: `rollout.engines`) against the synchronous loop (0), where the episodes
wait real time (a benchmark, not a test).

The same run at each staleness, in this process, from the same random weights: a Qwen3 preset
(`--preset`, default `small`) with a 512-piece SentencePiece tokenizer trained on GSM8K's
questions, `--tasks` tasks x `--group` episodes per step through the in-process JetStream engine.
Each episode has `--waits` + 1 policy turns; after each of the first `--waits` the environment
answers after a real wait drawn from the episode benchmark's latency model, U(0.2, 2) s x
`--latency-scale`, seeded per episode and turn. (The answer comes back as the environment's reply
rather than a tool result, so a short warm start is enough: the loop and the engine see the same
thing, decode, wait, prefill the answer, decode again.) The warm start (`--warm-steps` of SFT on
such conversations, once, before both runs) teaches the random model to close its turns, without
which every episode would end at its first cut-off turn and never wait. The reward is whether the
last reply contains an "e"; no group is dropped for low variance (`grpo.min_std: null`), so every
step updates on all its episodes, and the learning rate is small (`--learning-rate`, 1e-5) so
that the policy, and with it the length of the episodes, stays where the warm start left it: the
runs do the same work per step. (At 1e-3 the runs learned apart, and episodes that stopped
waiting made a later step's rollout 3 times shorter than an earlier one's.)

`--runs` lists the runs: a staleness, or staleness:engines (default `0 1 1:2`). Reported per
run, over the steps after `--warmup` (compiles happen in the first ones) but the last (ahead of
the update nothing is played during it, so it would flatter the figure):
steps per hour, the mean seconds of a step, of its update and of its rollout, and the trainer's
idle share: the fraction of the step's wall time the update waited for rollouts (at staleness 0,
the whole rollout; ahead, only what the rollouts ahead had left when the update was done).

Run: `.venv/bin/python bench/async_rl.py [--steps 8] [--out runs/bench/async_rl]` (needs the
`serve` extra and JetStream, like the tests, and the data directory for GSM8K).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import time
from pathlib import Path

from toolorch_jax.checkpoint import is_model_checkpoint
from toolorch_jax.config import load_config
from toolorch_jax.data import Task
from toolorch_jax.datadir import data_path
from toolorch_jax.envs import Environment, Episode
from toolorch_jax.envs.base import Reply
from toolorch_jax.rl.config import ModelSection, RunConfig, SFTConfig, SFTData, TrainSection
from toolorch_jax.rl.pipeline import start_rollout, train_on_engines
from toolorch_jax.rl.sft import run_sft
from toolorch_jax.rl.train_step import OptimConfig
from toolorch_jax.rl.trainer import Trainer
from toolorch_jax.tokenizer import train_sentencepiece
from toolorch_jax.tools.base import ToolResult


def latency(episode_id: str, turn: int, scale: float) -> float:
  """The episode benchmark's model: U(0.2, 2) s, seeded per episode and turn."""
  return scale * random.Random(f"{episode_id}/{turn}").uniform(0.2, 2.0)


class WaitEpisode(Episode):
  def __init__(self, task, waits, scale):
    super().__init__(task)
    self.waits, self.scale = waits, scale
    self.turns, self.last = 0, ""

  def messages(self):
    return [{"role": "system", "content": "Ask the expert, then answer in one word."},
            {"role": "user", "content": self.task.prompt}]

  def tool_schemas(self):
    return []

  async def execute(self, call, context):
    return ToolResult(error="this environment has no tools")

  def observe(self, content, tool_calls):
    self.turns += 1
    self.last = content
    self.done = self.turns > self.waits

  async def reply(self, content, context):
    seconds = latency(context.episode_id, self.turns, self.scale)
    await asyncio.sleep(seconds)
    return Reply(EXPERT, latency_s=seconds)

  def score(self):
    return float("e" in self.last)


class WaitEnv(Environment):
  name = "wait"

  def __init__(self, tasks, waits, scale):
    self.count, self.waits, self.scale = tasks, waits, scale

  def tasks(self, split=None):
    return [Task(f"q{i}", f"Question {i}: what is six times seven?") for i in range(self.count)]

  def start(self, task):
    return WaitEpisode(task, self.waits, self.scale)


ASK, EXPERT, ANSWERS = "Let me ask the expert.", "The expert says: 42.", ("yes", "forty", "six", "no")


def warm_start(args, tokenizer: Path, out: Path) -> Path:
  """SFT on conversations shaped like the episodes: the model learns to end its turns."""
  demos = out / "demonstrations.jsonl"
  rng = random.Random(0)
  with demos.open("w") as lines:
    for task in WaitEnv(64, args.waits, 0.0).tasks():
      messages = WaitEpisode(task, args.waits, 0.0).messages()
      for _ in range(args.waits):
        messages += [{"role": "assistant", "content": ASK}, {"role": "user", "content": EXPERT}]
      messages.append({"role": "assistant", "content": rng.choice(ANSWERS)})
      lines.write(json.dumps({"messages": messages, "tools": []}) + "\n")
  config = SFTConfig(model=ModelSection(preset=args.preset, tokenizer=str(tokenizer)),
                     data=SFTData(str(demos), batch_size=16, enable_thinking=False),
                     optim=OptimConfig(learning_rate=3e-3, weight_decay=0.0),
                     train=TrainSection(steps=args.warm_steps, seq_len=512, micro_batch_rows=2,
                                        tensorboard=False, progress=False))
  model = out / "warmstart" / "model"
  if not is_model_checkpoint(str(model)):  # kept from an earlier run in the same --out
    run_sft(config, out / "warmstart")
  return model


def run_yaml(args, tokenizer: Path, init_from: Path) -> str:
  return f"""
model: {{preset: {args.preset}, tokenizer: {tokenizer}, init_from: {init_from}}}
env: {{name: "bench/async_rl.py WaitEnv (passed in, not built)"}}
rewards: {{components: [{{name: outcome, weight: 1.0}}]}}
grpo: {{drop_invalid: false, min_std: null, tis_cap: 2.0}}
optim: {{learning_rate: {args.learning_rate}}}
rollout: {{group_size: {args.group}, tasks_per_step: {args.tasks}, max_turns: {args.waits + 1},
           max_context: 512, max_new_tokens: {args.new_tokens}, slots: {args.slots}, concurrency: 64,
           enable_thinking: false}}
train: {{steps: {args.steps}, seq_len: 512, micro_batch_rows: 2, checkpoint_every: 1000,
         tensorboard: false, progress: false}}
"""


def one_run(args, config_path: Path, staleness: int, engines: int, workdir: Path) -> dict:
  shutil.rmtree(workdir, ignore_errors=True)
  config = load_config(RunConfig, config_path, [f"grpo.max_staleness={staleness}",
                                                f"rollout.engines={engines}"])
  env = WaitEnv(args.tasks * 4, args.waits, args.latency_scale)
  start = time.perf_counter()
  trainer = Trainer(config, workdir, env=env)
  with contextlib.closing(start_rollout(config, trainer)) as rollout:
    train_on_engines(config, trainer, rollout)
  wall = time.perf_counter() - start
  lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  timed = lines[args.warmup:-1]  # at staleness > 0 nothing is played during the last step
  seconds = sum(line["step_seconds"] for line in timed)
  return {
      "staleness": staleness, "engines": engines, "wall_s": wall, "timed_steps": len(timed),
      "steps_per_hour": 3600 * len(timed) / seconds,
      "step_s": seconds / len(timed),
      "update_s": sum(line.get("train/seconds", 0.0) for line in timed) / len(timed),
      "rollout_s": sum(line["rollout/seconds"] for line in timed) / len(timed),
      "idle_share": sum(line["rollout/wait_seconds"] for line in timed) / seconds,
      "reward_mean": sum(line["reward/mean"] for line in lines) / len(lines),
      "max_rollout_staleness": max(line["rollout/staleness"] for line in lines),
      "waits_per_episode": sum(line["turns"] for line in lines) / len(lines) - 1,
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--preset", default="small")
  parser.add_argument("--steps", type=int, default=8)
  parser.add_argument("--warmup", type=int, default=2, help="first steps left out of the figures")
  parser.add_argument("--tasks", type=int, default=4, help="tasks per step")
  parser.add_argument("--group", type=int, default=8, help="episodes per task")
  parser.add_argument("--waits", type=int, default=3, help="real waits per episode")
  parser.add_argument("--latency-scale", type=float, default=1.0)
  parser.add_argument("--slots", type=int, default=32, help="engine decode slots")
  parser.add_argument("--new-tokens", type=int, default=32, help="tokens per policy turn")
  parser.add_argument("--warm-steps", type=int, default=60, help="SFT steps of the warm start")
  parser.add_argument("--learning-rate", type=float, default=1e-5,
                      help="small, so that every run plays about the same episodes all along")
  parser.add_argument("--runs", nargs="+", default=["0", "1", "1:2"],
                      help="grpo.max_staleness of each run, or staleness:rollout.engines")
  parser.add_argument("--out", default="runs/bench/async_rl")
  args = parser.parse_args()
  if args.steps <= args.warmup + 1:
    parser.error("--steps must exceed --warmup + 1")

  out = Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  with data_path("gsm8k/test.jsonl").open(encoding="utf-8") as lines:
    questions = [json.loads(line)["question"] for line in lines]
  config_path = out / "run.yaml"
  tokenizer = train_sentencepiece(questions, 512, out / "sp")
  config_path.write_text(run_yaml(args, tokenizer, warm_start(args, tokenizer, out)))
  load = os.getloadavg()[0]
  runs = [tuple(int(n) for n in f"{run}:1".split(":")[:2]) for run in args.runs]
  results = [one_run(args, config_path, s, e, out / f"staleness{s}_engines{e}") for s, e in runs]

  base = results[0]["steps_per_hour"]
  print(f"{args.preset}, {args.tasks}x{args.group} episodes/step, {args.waits} waits of"
        f" U(0.2, 2) s x {args.latency_scale}, {args.slots} slots, steps {args.warmup + 1}-{args.steps - 1}"
        " timed;"
        f" {os.cpu_count()} CPUs, load average {load:.1f} at the start, {os.getloadavg()[0]:.1f}"
        " at the end")
  print("| staleness | engines | steps/hour | vs first | step s | update s | rollout s |"
        " trainer idle | wall s (all steps) | waits/episode | mean reward |")
  print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
  for r in results:
    print(f"| {r['staleness']} | {r['engines']} | {r['steps_per_hour']:.0f} |"
          f" {r['steps_per_hour'] / base:.2f}x |"
          f" {r['step_s']:.2f} | {r['update_s']:.2f} | {r['rollout_s']:.2f} |"
          f" {100 * r['idle_share']:.0f}% | {r['wall_s']:.0f} | {r['waits_per_episode']:.2f} |"
          f" {r['reward_mean']:.3f} |")
  (out / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
  main()
