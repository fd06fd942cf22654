"""`toolorch plan` (per-device memory of a training step) and `toolorch convert` (weights between
Hugging Face and orbax)."""

from __future__ import annotations

import argparse
import os

from toolorch_jax.cli.parsers import add_command, add_job_flags, add_overrides
from toolorch_jax.config import ConfigError


def _force_fake_devices(count: int) -> None:
  """Plans compile for `count` fake CPU devices. XLA reads these flags when JAX first touches a
  device, so this must run before anything asks JAX for devices (importing JAX is fine)."""
  import jax

  flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
           if not f.startswith("--xla_force_host_platform_device_count")]
  os.environ["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={count}"])
  jax.config.update("jax_platforms", "cpu")


def cmd_plan(args: argparse.Namespace) -> int:
  """Compile one AdamW training step for a model preset on a mesh of fake CPU devices (no weights
  are materialised) and print per-device bytes for parameters, optimizer state, gradients and
  activations from XLA's memory analysis, and whether it fits. With --config, plan a run config
  instead: its model, its train rows (train.micro_batch_rows x train.seq_len) and its rollout
  engine's KV cache (rollout.slots x rollout.max_context), on each of its clusters (or the one
  `cluster=NAME` picks, or its mesh)."""
  if args.config:
    return _plan_recipe(args)
  from toolorch_jax.model.sharding import MeshConfig

  mesh = MeshConfig.parse(args.mesh)
  if mesh.num_devices is None:
    raise ConfigError("--mesh: give every axis a size (no -1) for a plan")
  _force_fake_devices(mesh.num_devices)
  from toolorch_jax.model.config import load_model_config
  from toolorch_jax.model.plan import plan_memory

  config = load_model_config(args.model, args.overrides)
  batch = args.batch or mesh.data * mesh.fsdp
  plan = plan_memory(config, mesh, model_name=args.model, batch=batch, seq_len=args.seq_len,
                     hbm_gib=args.hbm_gib)
  print(plan.render())
  return 0


def _plan_recipe(args: argparse.Namespace) -> int:
  from toolorch_jax.config import load_config
  from toolorch_jax.rl.config import ClusterConfig, RunConfig

  run = load_config(RunConfig, args.config, args.overrides)
  clusters = ({run.cluster: run.clusters[run.cluster]} if run.cluster else run.clusters) or {
      "mesh": ClusterConfig(mesh=run.mesh, hbm_gib=args.hbm_gib)}
  for name, cluster in clusters.items():
    if cluster.mesh.num_devices is None:
      raise ConfigError(f"clusters.{name}.mesh: give every axis a size (no -1) for a plan")
  _force_fake_devices(max(c.mesh.num_devices for c in clusters.values()))
  from toolorch_jax.model.config import load_model_config
  from toolorch_jax.model.plan import RecipePlan, plan_kv_cache, plan_memory

  model = load_model_config(run.model.preset, run.model.overrides)
  for name, cluster in clusters.items():
    train = plan_memory(model, cluster.mesh, model_name=run.model.preset,
                        batch=run.train.micro_batch_rows, seq_len=run.train.seq_len,
                        hbm_gib=cluster.hbm_gib)
    cache = plan_kv_cache(model, cluster.mesh, slots=run.rollout.slots,
                          max_length=run.rollout.max_context)
    train.batch_name = "micro-batch"
    print(RecipePlan(name, cluster.description, train, cache).render() + "\n")
  return 0


def cmd_convert(args: argparse.Namespace) -> int:
  """Convert a Hugging Face Qwen3 directory or a toolorch orbax checkpoint (format detected from
  SRC) into the format given by --to, optionally casting the dtype."""
  from toolorch_jax import checkpoint
  from toolorch_jax.model import save_hf

  source = checkpoint.weights_format(args.src)
  model, config = checkpoint.load_pretrained(args.src, dtype=args.dtype)
  if args.to == "hf":
    save_hf(model, config, args.dst)
  else:
    checkpoint.save_model(model, config, args.dst)
  print(f"converted {source} {args.src} -> {args.to} {args.dst}"
        f" ({config.num_params:,} parameters, {config.param_dtype})")
  return 0


def add_parsers(subparsers) -> None:
  plan = add_command(subparsers, "plan", cmd_plan,
                     "per-device memory of a training step, compiled on fake devices")
  plan.add_argument("--config", default="", help="a run config: plan its model, rows and KV cache"
                    " on its clusters (key=value words override the run config)")
  plan.add_argument("--model", default="qwen3-8b", help="preset name in configs/model/ or a YAML path")
  plan.add_argument("--mesh", default="fsdp=8", help="mesh axes, e.g. fsdp=8 or data=2,fsdp=4,tensor=2")
  plan.add_argument("--hbm-gib", type=float, default=80.0, help="memory per device in GiB")
  plan.add_argument("--batch", type=int, default=0,
                    help="global batch in sequences (default: one per data*fsdp shard)")
  plan.add_argument("--seq-len", type=int, default=4096, help="tokens per sequence")
  add_overrides(plan, "model config (run config with --config)", "remat=none")

  convert = add_command(subparsers, "convert", cmd_convert,
                        "convert weights between Hugging Face and orbax checkpoints")
  convert.add_argument("src", help="Hugging Face directory or toolorch checkpoint (local or gs://)")
  convert.add_argument("dst", help="output directory (local or gs://)")
  convert.add_argument("--to", choices=("hf", "orbax"), required=True, help="output format")
  convert.add_argument("--dtype", choices=("float32", "bfloat16"), default=None,
                       help="cast the weights (default: keep)")
  add_job_flags(convert)
