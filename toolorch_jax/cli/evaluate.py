"""`toolorch eval`: play an environment's tasks with a policy; write results and a summary."""

from __future__ import annotations

import argparse
import json

from toolorch_jax.cli.parsers import add_command, add_job_flags, add_overrides
from toolorch_jax.config import ConfigError
from toolorch_jax.rollout.config import EpisodeConfig

GREEDY = 0.0  # evaluation decodes greedily unless asked to sample


def cmd_eval(args: argparse.Namespace) -> int:
  """Play each task of an environment once with a policy and write DIR/results.jsonl (one line
  per task), DIR/trajectories.jsonl and DIR/summary.json (success rate, cost, latency, tool mix).
  The data directory comes from $TOOLORCH_DATA_DIR when set."""
  from toolorch_jax.distributed import is_primary
  from toolorch_jax.envs import load_env
  from toolorch_jax.rollout.config import RolloutConfig
  from toolorch_jax.rollout.evaluate import evaluate
  from toolorch_jax.rollout.summary import write_results

  env = load_env(args.env, args.overrides)
  tasks = list(env.tasks(args.split))[:args.limit or None]
  if not tasks:
    raise ConfigError(f"--split {args.split}: the environment has no tasks there")
  config = RolloutConfig(max_turns=args.max_turns, max_context=args.max_context,
                         max_new_tokens=args.max_new_tokens, enable_thinking=args.enable_thinking,
                         concurrency=args.concurrency, slots=args.concurrency,
                         temperature=args.temperature)
  trajectories = evaluate(env, tasks, args.policy, config, args.tokenizer, args.model)
  if is_primary():  # one writer in a multi-host job
    print(json.dumps(write_results(args.out, trajectories), indent=2))
  return 0


def add_parsers(subparsers) -> None:
  parser = add_command(subparsers, "eval", cmd_eval, "evaluate a policy on an environment's tasks")
  parser.add_argument("--env", required=True, help="environment preset in configs/envs/ or a YAML file")
  parser.add_argument("--policy", required=True,
                      help="gold (replay the tasks' gold solutions), hf:DIR, checkpoint:DIR, or the"
                      " base URL of an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1)")
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
