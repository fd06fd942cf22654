"""`toolorch train` and `toolorch sft`."""

from __future__ import annotations

import argparse

from toolorch_jax.cli.parsers import add_command, add_job_flags, add_overrides
from toolorch_jax.config import ConfigError, config_dir, load_config

DEFAULT_CONFIG = "local.yaml"  # the embedded default run


def cmd_train(args: argparse.Namespace) -> int:
  """Train with GRPO: tokenizer, warm start, evaluation, rollouts through the in-process JetStream
  engine, composite rewards, group advantages, a sharded Optax update, weights hot-swapped into the
  engine, evaluation and report, with metrics and orbax checkpoints. Running again with the same
  --workdir resumes."""
  from toolorch_jax.datadir import ensure_data_dir
  from toolorch_jax.rl.config import RunConfig
  from toolorch_jax.rl.pipeline import run_training

  if not args.config:  # the embedded default run fetches its data on a fresh clone
    ensure_data_dir()
  path = args.config or str(config_dir() / DEFAULT_CONFIG)
  run_training(load_config(RunConfig, path, args.overrides), args.workdir)
  return 0


def cmd_sft(args: argparse.Namespace) -> int:
  """Next-token training on a JSONL of chat conversations with tool calls, tokenised exactly as
  episodes are (loss on assistant turns only); checkpoints like train, and the final model is
  written to WORKDIR/model for model.init_from."""
  from toolorch_jax.rl.config import SFTConfig
  from toolorch_jax.rl.sft import run_sft

  if not args.config:
    raise ConfigError("--config: give the SFT run config")
  run_sft(load_config(SFTConfig, args.config, args.overrides), args.workdir)
  return 0


def add_parsers(subparsers) -> None:
  train = add_command(subparsers, "train", cmd_train,
                      "GRPO training of the orchestrator (default: the embedded CPU run)")
  train.add_argument("--config", help=f"run config YAML (default: configs/{DEFAULT_CONFIG})")
  train.add_argument("--workdir", default="runs/local", help="checkpoints, metrics and reports")
  add_job_flags(train)
  add_overrides(train, "run config", "train.steps=10")

  sft = add_command(subparsers, "sft", cmd_sft, "supervised warm start on demonstration conversations")
  sft.add_argument("--config", help="SFT config YAML")
  sft.add_argument("--workdir", default="runs/sft", help="checkpoints, metrics and the final model")
  add_job_flags(sft)
  add_overrides(sft, "SFT config", "train.steps=50")
