"""The one override syntax: `key.sub=value` words after the command, for every command that
takes a config (OmegaConf dot-list, checked against the config's schema)."""

from __future__ import annotations

import argparse


def add_overrides(parser: argparse.ArgumentParser, what: str, example: str) -> None:
  parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                      help=f"{what} overrides, e.g. {example}")
