"""The `toolorch` command: a subcommand per job, each in its module of this package.

Subcommand modules only turn flags and `key=value` overrides into the library's configs and call
it; defaults come from those configs. Errors a user can fix (a bad key, a missing file, a missing
extra) print one line naming the problem and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from toolorch_jax.cli import data, evaluate, model, serve, synth, tokenizer, tools, train
from toolorch_jax.config import ConfigError

SUBCOMMANDS = (train, evaluate, serve, model, tools, tokenizer, synth, data)


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog="toolorch", description="Train and serve tool-orchestration policies in JAX.")
  sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
  for module in SUBCOMMANDS:
    module.add_parsers(sub)
  return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
  """The command line; `key=value` words count as overrides wherever they stand after the
  command (argparse alone takes them only before a command's options)."""
  parser = build_parser()
  args, rest = parser.parse_known_args(argv)
  stray = [word for word in rest if word.startswith("-") or "=" not in word]
  if stray or (rest and not hasattr(args, "overrides")):
    parser.error(f"unrecognized arguments: {' '.join(stray or rest)}")
  if rest:
    args.overrides = [*args.overrides, *rest]
  return args


def main(argv: Sequence[str] | None = None) -> int:
  args = parse(argv)
  try:
    if hasattr(args, "coordinator_address"):  # a command that runs JAX: join the job first
      from toolorch_jax.distributed import initialize_from_args

      initialize_from_args(args)
    return args.func(args)
  except (ConfigError, FileNotFoundError, RuntimeError, ImportError) as err:
    print(f"toolorch {args.command}: error: {err}", file=sys.stderr)
    return 2
