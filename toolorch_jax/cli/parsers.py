"""How every subcommand is declared: its `--help` text comes from its function's docstring, and a
command that takes a config takes overrides the one way, as `key.sub=value` words after it
(OmegaConf dot-list, checked against the config's schema)."""

from __future__ import annotations

import argparse
import inspect
from typing import Callable


def add_command(subparsers, name: str, run: Callable[[argparse.Namespace], int],
                summary: str) -> argparse.ArgumentParser:
  """Subcommand `name`: `summary` in the command list, `run`'s docstring as its description."""
  parser = subparsers.add_parser(name, help=summary, description=inspect.getdoc(run))
  parser.set_defaults(func=run)
  return parser


def add_group(subparsers, name: str, summary: str):
  """Subcommand `name` whose actions (`toolorch tools list`, ...) are added to what it returns."""
  parser = subparsers.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".")
  return parser.add_subparsers(dest=f"{name}_action", required=True, metavar="ACTION")


def add_job_flags(parser: argparse.ArgumentParser) -> None:
  """The multi-host flags of a command that runs JAX; `main` joins the job before it runs."""
  from toolorch_jax.distributed import add_arguments

  add_arguments(parser)


def add_overrides(parser: argparse.ArgumentParser, what: str, example: str) -> None:
  parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                      help=f"{what} overrides, e.g. {example}")
