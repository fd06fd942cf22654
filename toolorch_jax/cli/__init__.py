"""The `toolorch` command: every entry point in one place, argument wiring only."""

from toolorch_jax.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
