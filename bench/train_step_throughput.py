"""Train-step tokens/s on CPU: ours beside Tunix's Qwen3 and transformers' Qwen3 (not a test).

Same random weights (saved with `save_hf`, loaded by all three), the same batch of random token
ids (B sequences of T tokens), next-token cross-entropy, one AdamW update per step (lr 1e-6,
weight decay 0.01, global-norm clip 1.0). `--workload sft` (the default) takes the loss on every
token of unrelated sequences; `--workload grpo` is shaped like an RL batch: groups of
`--group-size` sequences share their first `--prompt-len` tokens (a group's prompt) and the loss
is on the rest only (the policy's tokens), which ours packs once per group
(`train.share_prefixes`) and the others compute per sequence, as they do. Tokens/s counts B x T
for every side. Ours is the project's jitted train step (`TrainStep` with the SFT objective,
packed rows, one micro-batch); Tunix's model runs under
`nnx.jit` with `nnx.Optimizer`; transformers runs eagerly in torch (2 threads). Each side gets
warm-up steps (compilation excluded), then the best of `--repeats` timed runs of `--steps` steps.

The device is JAX's default backend (transformers stays on the CPU); each side on that device is
also reported as MFU: the model FLOPs the batch needs at least (`device_peaks.train_flops`: a
group's shared prompt through the trunk once, the vocabulary projection only at loss targets, so
the sides that recompute each prompt do more than is counted) per second over the device's peak
(an accelerator's bf16 datasheet rate; on a CPU the float32 matmul rate measured on the spot, so
an MFU near 100% leaves no room for a faster implementation).
`--skip-tunix` / `--skip-transformers` leave a side out (on an accelerator `bench/accelerator.sh`
runs ours alone on the Qwen3 0.6B and 1.7B presets in bf16).

Run in the benchmark venv (see bench/README.md): `../bench-venv/bin/python bench/train_step_throughput.py`
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import yaml
from flax import nnx

from toolorch_jax.model import create_model, load_model_config, save_hf
from toolorch_jax.rl.batch import Sample, pack
from toolorch_jax.rl.train_step import (OptimConfig, TrainStep, build_optimizer, sft_objective,
                                        step_compiler_options)

sys.path.insert(0, str(Path(__file__).parent))
from device_peaks import current_device, peaks_line, percent, train_flops  # noqa: E402
from serving_throughput import load_tunix, set_tunix_rope_theta  # noqa: E402


def timed(step, steps: int, repeats: int) -> float:
  step()  # warm-up / compile
  step()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    for _ in range(steps):
      step()
    best = min(best, (time.perf_counter() - start) / steps)
  return best


def ours(config, tokens, loss_from, steps, repeats, row_len, loss_chunk_tokens=0,
         compiler_options=None):
  model = create_model(config, seed=0)
  graphdef, params = nnx.split(model)
  optimizer = build_optimizer(OptimConfig())
  state = {"params": params, "opt": optimizer.init(params)}
  functions = TrainStep(graphdef, optimizer, sft_objective, loss_chunk_tokens=loss_chunk_tokens,
                        compiler_options=compiler_options)
  batch = pack([Sample(row, [0] * loss_from + [1] * (len(row) - loss_from)) for row in tokens],
               seq_len=row_len)
  micro = batch.micro_batches(1)

  def step():
    state["params"], state["opt"], metrics = functions.update(state["params"], state["opt"], micro,
                                                              batch.num_tokens, batch.num_sequences)
    jax.block_until_ready(metrics["loss"])

  return timed(step, steps, repeats)


def tunix(hf_dir, config, tokens, loss_from, steps, repeats):
  model = load_tunix(hf_dir, config)
  set_tunix_rope_theta(config.rope_theta)
  optimizer = nnx.Optimizer(model, optax.chain(optax.clip_by_global_norm(1.0),
                                               optax.adamw(1e-6, weight_decay=0.01)), wrt=nnx.Param)
  inputs, targets = jnp.asarray(tokens[:, :-1]), jnp.asarray(tokens[:, 1:])
  length = inputs.shape[1]
  positions = jnp.broadcast_to(jnp.arange(length), inputs.shape)
  mask = jnp.broadcast_to(jnp.tril(jnp.ones((length, length), bool)), (inputs.shape[0], length, length))
  weights = (jnp.arange(length) >= loss_from - 1).astype(jnp.float32)  # targets from loss_from on

  @nnx.jit
  def train_step(model, optimizer):
    def loss_fn(model):
      logits, _ = model(inputs, positions, None, mask)
      losses = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
      return jnp.sum(losses * weights) / (jnp.sum(weights) * inputs.shape[0])
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss

  return timed(lambda: jax.block_until_ready(train_step(model, optimizer)), steps, repeats)


def transformers_step(hf_dir, tokens, loss_from, steps, repeats):
  import torch
  import transformers
  torch.set_num_threads(2)
  model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).train()
  optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01)
  ids = torch.tensor(tokens, dtype=torch.long)
  labels = ids.clone()
  labels[:, :loss_from] = -100  # transformers shifts the labels itself: targets from loss_from on

  def step():
    optimizer.zero_grad()
    loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()

  return timed(step, steps, repeats)


def batch_tokens(args, vocab_size: int) -> tuple[np.ndarray, int]:
  """(token ids [B, T + 1], index of the first token the loss is on)."""
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, vocab_size, (args.batch, args.seq_len + 1))
  if args.workload == "sft":
    return tokens, 0
  if args.batch % args.group_size or not 0 < args.prompt_len < args.seq_len:
    raise SystemExit("--workload grpo needs --batch a multiple of --group-size and"
                     " 0 < --prompt-len < --seq-len")
  prompts = rng.integers(0, vocab_size, (args.batch // args.group_size, args.prompt_len))
  tokens[:, :args.prompt_len] = np.repeat(prompts, args.group_size, axis=0)
  return tokens, args.prompt_len


def least_work(args, loss_from: int) -> dict[str, int]:
  """Tokens a step must run through the trunk (a group's shared first `loss_from` tokens once)
  and positions the loss is on (from the one before `loss_from`), for `batch_tokens`' batch; an
  SFT batch (`loss_from` 0) shares nothing and takes the loss everywhere."""
  shared_copies = args.batch - args.batch // args.group_size
  return {"trunk_tokens": args.batch * args.seq_len - shared_copies * loss_from,
          "target_tokens": args.batch * (args.seq_len - max(loss_from - 1, 0))}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--configs", nargs="+", default=["small", "qwen3-100m"])
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seq-len", type=int, default=256)
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--workload", choices=["sft", "grpo"], default="sft")
  parser.add_argument("--group-size", type=int, default=8, help="grpo: sequences sharing a prompt")
  parser.add_argument("--prompt-len", type=int, default=192, help="grpo: tokens of each prompt")
  parser.add_argument("--loss-chunk-tokens", type=int, default=0,
                      help="ours: train.loss_chunk_tokens (0: full logits)")
  parser.add_argument("--row-len", type=int, default=0,
                      help="ours: train.seq_len, the packed rows' length (0: --seq-len); a row holds"
                           " one prefix tree, so sharing needs rows longer than a sequence")
  parser.add_argument("--compiler-option", action="append", default=[], metavar="KEY=VALUE",
                      help="ours: one of train.compiler_options (XLA's options for the train step's"
                           " programs alone); repeat for more")
  parser.add_argument("--model-override", action="append", default=[], metavar="KEY=VALUE",
                      help="a model config field over each preset's (e.g. attention_query_block=0);"
                           " repeat for more")
  parser.add_argument("--skip-tunix", action="store_true")
  parser.add_argument("--skip-transformers", action="store_true")
  parser.add_argument("--out", default="runs/bench")
  args = parser.parse_args()
  if any("=" not in option for option in args.compiler_option):
    parser.error(f"--compiler-option takes KEY=VALUE, got {args.compiler_option}")
  # values as YAML reads them, as `toolorch train train.compiler_options.KEY=VALUE` does: XLA
  # takes a boolean option as a bool, not the string "true"
  compiler_options = {key: yaml.safe_load(value) for key, value in
                      (option.split("=", 1) for option in args.compiler_option)}
  row_len = args.row_len or args.seq_len
  device = current_device()
  step_options = step_compiler_options(compiler_options, device.platform) or {}
  rows = []
  for name in args.configs:
    config = load_model_config(name, args.model_override)
    tokens, loss_from = batch_tokens(args, config.vocab_size)
    per_step = {"ours": ours(config, tokens, loss_from, args.steps, args.repeats, row_len,
                             args.loss_chunk_tokens, compiler_options)}
    if not (args.skip_tunix and args.skip_transformers):
      with tempfile.TemporaryDirectory() as tmp:
        save_hf(create_model(config, seed=0), config, tmp)
        if not args.skip_tunix:
          per_step["tunix"] = tunix(Path(tmp), config, tokens, loss_from, args.steps, args.repeats)
        if not args.skip_transformers:
          per_step["transformers"] = transformers_step(tmp, tokens, loss_from, args.steps,
                                                       args.repeats)
    tokens_per_step = args.batch * args.seq_len
    row = {"config": name, "params": config.num_params, "dtype": config.dtype, "device": device.kind,
           "workload": args.workload, "loss_chunk_tokens": args.loss_chunk_tokens,
           "row_len": row_len, "compiler_options": step_options,
           "attention_query_block": config.attention_query_block,
           **{f"{k}_tok_s": tokens_per_step / v for k, v in per_step.items()}}
    step_flops = train_flops(config, args.seq_len, **least_work(args, loss_from))
    for trainer in [k for k in per_step if k != "transformers" or device.platform == "cpu"]:
      row[f"{trainer}_mfu"] = device.mfu(step_flops / per_step[trainer])
    for other in ("tunix", "transformers"):
      if f"{other}_tok_s" in row:
        row[f"ours_over_{other}"] = row["ours_tok_s"] / row[f"{other}_tok_s"]
    rows.append(row)
    print(json.dumps(row), flush=True)
  out = Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  cell = lambda row, key, fmt: format(row[key], fmt) if key in row else "—"
  shape = (f"{args.batch} x {args.seq_len} tokens" if args.workload == "sft" else
           f"{args.batch} x {args.seq_len} tokens in groups of {args.group_size} sharing"
           f" {args.prompt_len}-token prompts, loss on the rest; ours packed in rows of"
           f" {row_len}")
  mfu = lambda row, trainer: percent(row[f"{trainer}_mfu"]) if f"{trainer}_mfu" in row else "—"
  lines = [peaks_line(device), "", f"Workload {args.workload} ({shape}); ours with"
           f" train.loss_chunk_tokens = {args.loss_chunk_tokens} and XLA options {step_options or '{}'}"
           f" (train.compiler_options {compiler_options or '{}'} over the platform's defaults).", "",
           "| config | params | dtype | query block | ours tok/s | ours MFU | Tunix tok/s | Tunix MFU"
           " | transformers tok/s | transformers MFU | ours/Tunix | ours/transformers |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
  lines += [f"| {r['config']} | {r['params'] / 1e6:.1f}M | {r['dtype']}"
            f" | {r['attention_query_block']} | {r['ours_tok_s']:.0f}"
            f" | {mfu(r, 'ours')} | {cell(r, 'tunix_tok_s', '.0f')} | {mfu(r, 'tunix')}"
            f" | {cell(r, 'transformers_tok_s', '.0f')} | {mfu(r, 'transformers')}"
            f" | {cell(r, 'ours_over_tunix', '.2f')}"
            f" | {cell(r, 'ours_over_transformers', '.2f')} |" for r in rows]
  stem = "train_step" if args.workload == "sft" else f"train_step_{args.workload}"
  (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
  (out / f"{stem}.json").write_text(json.dumps(rows, indent=2) + "\n")
  print("\n".join(lines))


if __name__ == "__main__":
  main()
