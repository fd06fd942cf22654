"""`toolorch eval`: play an environment's tasks with a policy; write results and a summary."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from toolorch_jax.cli.parsers import add_command, add_job_flags, add_overrides
from toolorch_jax.config import ConfigError
from toolorch_jax.rollout.config import EpisodeConfig

GREEDY = 0.0  # evaluation decodes greedily unless asked to sample


def cmd_eval(args: argparse.Namespace) -> int:
  """Play each task of an environment with a policy (--trials times: pass^k) and write
  DIR/results.jsonl (one line per episode), DIR/trajectories.jsonl and DIR/summary.json (success
  rate, pass^k, cost, latency, tool mix). With --suite, play each benchmark of a suite and write
  DIR/<benchmark>/ and DIR/table.md (the paper's table beside ours). With --replay, replay a τ²
  results file through the τ² environment instead: DIR/results.jsonl (our reward beside the
  recorded one, outputs matched) and DIR/summary.json. The data directory comes from
  $TOOLORCH_DATA_DIR when set."""
  from toolorch_jax.distributed import is_primary
  from toolorch_jax.rollout.config import RolloutConfig

  config = RolloutConfig(max_turns=args.max_turns, max_context=args.max_context,
                         max_new_tokens=args.max_new_tokens, enable_thinking=args.enable_thinking,
                         concurrency=args.concurrency, slots=args.concurrency,
                         temperature=args.temperature)
  if args.suite:
    return _eval_suite(args, config)
  if args.replay:
    return _replay(args)
  for flag, value in (("--env", args.env), ("--policy", args.policy)):
    if not value:
      raise ConfigError(f"{flag} is required (or give --suite, or --replay with --env)")
  from toolorch_jax.rollout.summary import write_results

  trajectories = _play(args.env, args.overrides, args.split, args.limit, args.policy,
                       args.trials, config, args)
  if is_primary():  # one writer in a multi-host job
    print(json.dumps(write_results(args.out, trajectories), indent=2))
  return 0


def _replay(args: argparse.Namespace) -> int:
  from toolorch_jax.envs import load_env
  from toolorch_jax.envs.tau2.env import Tau2Environment
  from toolorch_jax.envs.tau2.replay import replay_results

  if not args.env or args.policy:
    raise ConfigError("--replay takes the place of --policy and needs --env (e.g. tau2_airline)")
  env = load_env(args.env, args.overrides)
  if not isinstance(env, Tau2Environment):
    raise ConfigError(f"--replay: needs a τ² environment (e.g. --env tau2_airline), got"
                      f" '{type(env).__name__}'")
  summary = replay_results(env, args.replay, args.out)
  print(json.dumps({k: v for k, v in summary.items() if not k.endswith("_mismatches")}, indent=2))
  return 0


def _play(env_name, overrides, split, limit, policy, trials, config, args):
  from toolorch_jax.envs import load_env
  from toolorch_jax.rollout.evaluate import evaluate

  env = load_env(env_name, overrides)
  tasks = list(env.tasks(split))[:limit or None]
  if not tasks:
    raise ConfigError(f"--split {split}: the environment has no tasks there")
  return evaluate(env, tasks, policy, config, args.tokenizer, args.model, trials)


def _eval_suite(args: argparse.Namespace, config) -> int:
  from toolorch_jax.rollout.suite import load_suite, run_suite

  if args.env:
    raise ConfigError("--suite names its environments: drop --env")
  suite = load_suite(args.suite, args.overrides)
  play = lambda bench, policy: _play(bench.env, bench.overrides, bench.split, bench.limit, policy,
                                     bench.trials, config, args)
  table = run_suite(suite, play, args.out, args.policy or "")
  print((Path(args.out) / "table.md").read_text(encoding="utf-8"))
  return 0 if table["benchmarks"] else 1


def add_parsers(subparsers) -> None:
  parser = add_command(subparsers, "eval", cmd_eval, "evaluate a policy on an environment's tasks")
  parser.add_argument("--env", help="environment preset in configs/envs/ or a YAML file")
  parser.add_argument("--suite", help="a benchmark suite in configs/suites/ or a YAML file, in"
                      " place of --env (overrides then apply to the suite)")
  parser.add_argument("--trials", type=int, default=1,
                      help="episodes per task; summary.json reports pass^1..pass^N")
  parser.add_argument("--policy",
                      help="gold (replay the tasks' gold solutions), hf:DIR, checkpoint:DIR, or the"
                      " base URL of an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1)")
  parser.add_argument("--replay", metavar="RESULTS.json",
                      help="a τ²-bench results file: replay its simulations through a τ²"
                      " environment, check each tool output and re-score each simulation")
  parser.add_argument("--out", required=True, help="output directory")
  parser.add_argument("--split", default=None, help="task split (default: the environment's)")
  parser.add_argument("--limit", type=int, default=0, help="evaluate only the first N tasks")
  parser.add_argument("--model", default="default", help="model name sent to an endpoint policy")
  parser.add_argument("--tokenizer", help="tokenizer path (default: the model's, or Qwen3's)")
  parser.add_argument("--temperature", type=float, default=GREEDY, help="sampling temperature (0: greedy)")
  parser.add_argument("--max-turns", type=int, default=EpisodeConfig.max_turns)
  parser.add_argument("--max-context", type=int, default=EpisodeConfig.max_context,
                      help="tokens per episode")
  parser.add_argument("--max-new-tokens", type=int, default=EpisodeConfig.max_new_tokens,
                      help="tokens per assistant turn")
  parser.add_argument("--no-thinking", dest="enable_thinking", action="store_false",
                      help="render prompts with enable_thinking=False")
  parser.add_argument("--concurrency", type=int, default=EpisodeConfig.concurrency,
                      help="episodes in flight (and engine slots for a model policy)")
  add_job_flags(parser)
  add_overrides(parser, "environment config", "settings.split=test")
