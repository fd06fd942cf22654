"""Where a train step's time goes (not a test): each part of our step compiled and timed alone.

On one micro-batch of B random sequences of T tokens (next-token loss on every token, the SFT
objective; AdamW as `OptimConfig()`), for each `--loss-chunk-tokens` value (0 = full logits):

- transfer: the packed batch from host numpy to the device (`TrainStep._place`);
- forward, trunk: embedding and decoder layers (`Qwen3.hidden_states`);
- forward, + logits: the final norm and output projection on top ([B, T, V] float32 logits);
- forward, + log-softmax: the log-probs and entropies the loss needs (`_forward_logp`);
- forward + backward, trunk: gradient of a fixed linear function of the hidden states, so no
  vocabulary work at all;
- forward + backward, loss: gradient of the SFT loss (what the step differentiates);
- optimizer: the AdamW update and `apply_updates` on given gradients;
- whole step: `TrainStep.update` (transfer, gradients of each micro-batch, optimizer, metrics);
- whole step, GRPO (first chunk setting only): the same with the GRPO objective, and with
  `entropy_coef` 1e-30, whose gradient still runs through the entropy over the vocabulary.

Each part is the best of `--repeats` calls after two warm-up calls (the first's time, mostly
compilation, is reported), the chunk settings taking turns in every round. Differences of rows give the share of a stage (e.g. log-softmax over the vocabulary =
"+ log-softmax" - "+ logits"). The compiled temporary memory (XLA's `memory_analysis`) of
the step's gradient program and of the loss's gradient alone is reported per chunk setting, and recompilation is counted by updating with
batches of 1, 2 and 3 micro-batches and then 2 again (`--recompile-check`).

`--trace DIR` also writes a `jax.profiler` trace of `--steps` whole steps for TensorBoard/XProf.

  PYTHONPATH=$PWD python bench/train_step_profile.py --configs qwen3-100m --loss-chunk-tokens 0 512
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from toolorch_jax.model import create_model, load_model_config
from toolorch_jax.rl.batch import Sample, pack
from toolorch_jax.rl.grpo import GRPOConfig
from toolorch_jax.rl.train_step import (OptimConfig, TrainStep, _forward_logp, build_optimizer,
                                        grpo_objective, sft_objective)


def temp_bytes(compiled) -> int | None:
  analysis = compiled.memory_analysis()
  return None if analysis is None else int(analysis.temp_size_in_bytes)


def setup(config, tokens: np.ndarray, chunk: int, grpo: bool = False) -> dict:
  """The parts of one step (name -> call) for one chunk setting, with the compiled step's memory."""
  model = create_model(config, seed=0)
  graphdef, params = nnx.split(model)
  optimizer = build_optimizer(OptimConfig())
  opt_state = optimizer.init(params)
  step = TrainStep(graphdef, optimizer, sft_objective, loss_chunk_tokens=chunk)
  batch = pack([Sample(row, [1] * len(row)) for row in tokens], seq_len=tokens.shape[1] - 1)
  micro = batch.micro_batches(1)
  placed = step._place(micro)
  mb = jax.tree.map(lambda x: x[0], placed)
  n_tokens = jnp.float32(batch.num_tokens)
  direction = jax.random.normal(jax.random.key(1), (*mb["tokens"].shape, config.hidden_size))

  def hidden(p, mb):
    return nnx.merge(graphdef, p).hidden_states(mb["tokens"], mb["positions"],
                                                subtree_ends=mb["subtree_ends"])[0]

  def logits(p, mb):
    return nnx.merge(graphdef, p)(mb["tokens"], mb["positions"], subtree_ends=mb["subtree_ends"])[0]

  def loss(p, mb):
    logp, _ = _forward_logp(graphdef, p, mb, chunk)
    return -jnp.sum(logp * mb["loss_mask"]) / n_tokens

  trunk_grad = jax.jit(jax.grad(lambda p, mb: jnp.sum(hidden(p, mb) * direction)))
  loss_grad = jax.jit(jax.value_and_grad(loss))
  grads = jax.tree.map(jnp.ones_like, params)

  def adamw(g, s, p):
    updates, s = optimizer.update(g, s, p)
    return jax.tree.map(jnp.add, p, updates), s

  adamw = jax.jit(adamw)
  n_sequences = jnp.float32(batch.num_sequences)
  carry = step._zeros(params, mb, n_tokens, n_sequences)
  memory = {"step_temp_bytes": temp_bytes(
                step._accumulate.lower(carry, params, mb, n_tokens, n_sequences).compile()),
            "loss_grad_temp_bytes": temp_bytes(loss_grad.lower(params, mb).compile())}
  state = {"params": params, "opt": opt_state}

  def whole():
    state["params"], state["opt"], metrics = step.update(state["params"], state["opt"], micro,
                                                         batch.num_tokens, batch.num_sequences)
    return metrics["loss"]

  parts = {
      "transfer": lambda: step._place(micro),
      "forward, trunk": lambda f=jax.jit(hidden): f(state["params"], mb),
      "forward, + logits": lambda f=jax.jit(logits): f(state["params"], mb),
      "forward, + log-softmax": lambda f=jax.jit(loss): f(state["params"], mb),
      "forward + backward, trunk": lambda: trunk_grad(state["params"], mb),
      "forward + backward, loss": lambda: loss_grad(state["params"], mb),
      "optimizer": lambda: adamw(grads, state["opt"], state["params"]),
      "whole step": whole,
  }
  if grpo:
    parts.update(grpo_steps(graphdef, optimizer, state, micro, batch))
  return {"parts": parts, "memory": memory, "step": step, "state": state}


def grpo_steps(graphdef, optimizer, state: dict, micro: dict, batch) -> dict:
  """Whole GRPO steps (zero advantages), with entropy_coef 0 (whose loss leaves the entropy out)
  and 1e-30 (whose gradient goes through the entropy over the vocabulary, as every GRPO step's
  did before): what differentiating `0 x entropy` cost."""
  parts = {}
  for label, coef in (("whole step, GRPO", 0.0), ("whole step, GRPO + entropy gradient", 1e-30)):
    step = TrainStep(graphdef, optimizer, grpo_objective(GRPOConfig(entropy_coef=coef)))
    own = {"params": jax.tree.map(jnp.copy, state["params"]),
           "opt": jax.tree.map(jnp.copy, state["opt"])}

    def call(step=step, own=own):
      own["params"], own["opt"], metrics = step.update(own["params"], own["opt"], micro,
                                                       batch.num_tokens, batch.num_sequences)
      return metrics["loss"]

    parts[label] = call
  return parts


def time_interleaved(setups: dict[int, dict], repeats: int) -> dict[int, dict[str, tuple]]:
  """Per chunk setting and part: (first call's seconds = compilation + run, best timed call).
  The settings take turns within each round, so a neighbour's load hits them alike."""
  first, best = {}, {}
  for chunk, found in setups.items():
    for name, call in found["parts"].items():
      start = time.perf_counter()
      jax.block_until_ready(call())
      first[chunk, name] = time.perf_counter() - start
      jax.block_until_ready(call())
  for _ in range(repeats):
    for chunk, found in setups.items():
      for name, call in found["parts"].items():
        start = time.perf_counter()
        jax.block_until_ready(call())
        best[chunk, name] = min(best.get((chunk, name), float("inf")), time.perf_counter() - start)
  return {chunk: {name: (first[chunk, name], best[chunk, name]) for name in found["parts"]}
          for chunk, found in setups.items()}


def recompiles(step: TrainStep, state: dict, tokens: np.ndarray) -> list[dict]:
  """The step's compiled-program count after updates with 1, 2, 3, then 2 micro-batches."""
  rows = tokens.shape[0]
  programs = (step._micro, step._zeros, step._accumulate, step._apply)
  seen = []
  for count in (1, 2, 3, 2):
    sequences = np.concatenate([tokens] * count)
    batch = pack([Sample(r, [1] * len(r)) for r in sequences], seq_len=tokens.shape[1] - 1,
                 rows_multiple=rows)
    start = time.perf_counter()
    state["params"], state["opt"], metrics = step.update(
        state["params"], state["opt"], batch.micro_batches(count), batch.num_tokens,
        batch.num_sequences)
    jax.block_until_ready(metrics["loss"])
    seen.append({"micro_batches": count, "seconds": time.perf_counter() - start,
                 "compiled_programs": sum(f._cache_size() for f in programs)})
  return seen


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--configs", nargs="+", default=["qwen3-100m"])
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seq-len", type=int, default=256)
  parser.add_argument("--loss-chunk-tokens", type=int, nargs="+", default=[0, 512])
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--parts", nargs="+", default=None,
                      help="time only these parts (names as in the table), e.g. 'whole step'")
  parser.add_argument("--recompile-check", action="store_true")
  parser.add_argument("--trace", default="", help="directory for a jax.profiler trace")
  parser.add_argument("--steps", type=int, default=2, help="whole steps in the trace")
  parser.add_argument("--out", default="runs/bench")
  args = parser.parse_args()
  print(f"device: {jax.devices()[0].device_kind} x {len(jax.devices())}", flush=True)
  results = []
  for name in args.configs:
    config = load_model_config(name)
    tokens = np.random.default_rng(0).integers(0, config.vocab_size, (args.batch, args.seq_len + 1))
    setups = {chunk: setup(config, tokens, chunk, grpo=chunk == args.loss_chunk_tokens[0])
              for chunk in args.loss_chunk_tokens}
    if args.parts:
      for found in setups.values():
        found["parts"] = {k: v for k, v in found["parts"].items() if k in args.parts}
    timings = time_interleaved(setups, args.repeats)
    for chunk, found in setups.items():
      row = {"config": name, "chunk": chunk, "seconds": timings[chunk], **found["memory"]}
      step, state = found["step"], found["state"]
      if args.recompile_check and chunk == args.loss_chunk_tokens[0]:
        row["recompiles"] = recompiles(step, state, tokens)
      if args.trace and chunk == args.loss_chunk_tokens[0]:
        batch = pack([Sample(r, [1] * len(r)) for r in tokens], seq_len=args.seq_len)
        with jax.profiler.trace(args.trace):
          for _ in range(args.steps):
            state["params"], state["opt"], metrics = step.update(
                state["params"], state["opt"], batch.micro_batches(1), batch.num_tokens,
                batch.num_sequences)
            jax.block_until_ready(metrics["loss"])
      results.append(row)
      print(json.dumps(row), flush=True)
  lines = ["| config | loss chunk tokens | part | first call, s | best, s |", "|---|---:|---|---:|---:|"]
  for r in results:
    lines += [f"| {r['config']} | {r['chunk']} | {part} | {first:.3f} | {best:.3f} |"
              for part, (first, best) in r["seconds"].items()]
  lines += ["", "| config | loss chunk tokens | step temp MiB | loss+grad temp MiB |", "|---|---:|---:|---:|"]
  mib = lambda b: "n/a" if b is None else f"{b / 2**20:.1f}"
  lines += [f"| {r['config']} | {r['chunk']} | {mib(r['step_temp_bytes'])}"
            f" | {mib(r['loss_grad_temp_bytes'])} |" for r in results]
  out = Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  (out / "train_profile.md").write_text("\n".join(lines) + "\n")
  (out / "train_profile.json").write_text(json.dumps(results, indent=2) + "\n")
  print("\n".join(lines))


if __name__ == "__main__":
  main()
