"""`toolorch train` and `toolorch sft`."""

from __future__ import annotations

import argparse

from toolorch_jax.config import config_dir

DEFAULT_CONFIG = "local.yaml"


def _config_path(args) -> str:
  return args.config or str(config_dir() / DEFAULT_CONFIG)


def cmd_train(args: argparse.Namespace) -> int:
  from toolorch_jax.config import load_config
  from toolorch_jax.rl.config import RunConfig
  from toolorch_jax.rl.pipeline import run_training

  run_training(load_config(RunConfig, _config_path(args), args.overrides), args.workdir)
  return 0


def cmd_sft(args: argparse.Namespace) -> int:
  from toolorch_jax.config import ConfigError, load_config
  from toolorch_jax.rl.sft import SFTConfig, run_sft

  if not args.config:
    raise ConfigError("--config: give the SFT run config")
  run_sft(load_config(SFTConfig, args.config, args.overrides), args.workdir)
  return 0


def add_parser(subparsers) -> None:
  train = subparsers.add_parser(
      "train", help="GRPO training of the orchestrator (default: the embedded CPU run)",
      description="Train with GRPO: rollouts through the in-process JetStream engine, composite"
      " rewards, group advantages, a sharded Optax update, weights hot-swapped into the engine,"
      " metrics and orbax checkpoints. Running again with the same --workdir resumes from the"
      " latest checkpoint.")
  train.add_argument("--config", help=f"run config YAML (default: configs/{DEFAULT_CONFIG})")
  train.add_argument("--workdir", default="runs/local", help="checkpoints, metrics and reports")
  train.add_argument("overrides", nargs="*", help="config overrides, e.g. train.steps=10")
  train.set_defaults(func=cmd_train)

  sft = subparsers.add_parser(
      "sft", help="supervised warm start on demonstration conversations",
      description="Next-token training on a JSONL of chat conversations with tool calls, tokenised"
      " exactly as episodes are (loss on assistant turns only); checkpoints like train, and the"
      " final model is written to WORKDIR/model for model.init_from.")
  sft.add_argument("--config", help="SFT config YAML")
  sft.add_argument("--workdir", default="runs/sft", help="checkpoints, metrics and the final model")
  sft.add_argument("overrides", nargs="*", help="config overrides, e.g. train.steps=50")
  sft.set_defaults(func=cmd_sft)
