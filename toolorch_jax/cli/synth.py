"""`toolorch synth`: ToolScale synthesis of τ² domains and verified tasks (data_synth/)."""

from __future__ import annotations

import argparse
import json

from toolorch_jax.cli.parsers import add_command


def cmd_synth(args: argparse.Namespace) -> int:
  """Synthesise tool-use domains and verified tasks: DIR/<domain>/ (db.json, policy.md,
  tasks.json, split_tasks.json, tools.json), DIR/toolscale.jsonl, DIR/stats.json and DIR/stats.md.
  Offline (--offline): seeded fake data from the shipped domain descriptions. Otherwise an
  OpenAI-compatible endpoint (--base-url, --model) writes databases, tools and tasks. Stages are
  cached under DIR/.cache: a rerun redoes only what changed."""
  from data_synth.pipeline import SynthConfig, synthesize

  llm = None
  if not args.offline:
    from data_synth.llm import LLMSource

    llm = LLMSource.from_args(args.base_url, args.model, args.api_key_env, args.concurrency,
                              args.price_in, args.price_out)
  config = SynthConfig(out=args.out, seed=args.seed, tasks=args.tasks,
                       domains=tuple(args.domains) if args.domains else SynthConfig.domains,
                       pass_k=args.pass_k, pass_policy=args.pass_policy,
                       progress=not args.no_progress, llm=llm)
  stats = synthesize(config)
  print(json.dumps(stats["total"], indent=2))
  return 0


def add_parsers(subparsers) -> None:
  parser = add_command(subparsers, "synth", cmd_synth,
                       "synthesise τ² tool-use domains and verified tasks (ToolScale)")
  parser.add_argument("--out", required=True, help="output directory")
  parser.add_argument("--seed", type=int, default=0, help="seed of every random choice")
  parser.add_argument("--offline", action="store_true",
                      help="no LLM: fake data and tool chains from the domain descriptions")
  parser.add_argument("--domains", nargs="+", metavar="NAME_OR_FILE",
                      help="shipped domain names or description files (default: the shipped three)")
  parser.add_argument("--tasks", type=int, default=240, help="verified tasks wanted per domain")
  parser.add_argument("--pass-k", type=int, default=0,
                      help="keep only tasks solved in one of K attempts of --pass-policy (0: off)")
  parser.add_argument("--pass-policy", default="gold",
                      help="any policy `toolorch eval --policy` accepts")
  parser.add_argument("--base-url", help="LLM mode: OpenAI-compatible endpoint, e.g."
                      " http://127.0.0.1:8000/v1")
  parser.add_argument("--model", default="default", help="LLM mode: model name")
  parser.add_argument("--api-key-env", default="", help="LLM mode: variable holding the API key")
  parser.add_argument("--price-in", type=float, default=0.0, help="LLM mode: $ per 1M input tokens")
  parser.add_argument("--price-out", type=float, default=0.0,
                      help="LLM mode: $ per 1M output tokens")
  parser.add_argument("--concurrency", type=int, default=8, help="LLM mode: requests in flight")
  parser.add_argument("--no-progress", action="store_true", help="no progress bars")
