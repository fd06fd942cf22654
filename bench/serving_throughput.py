"""CPU decode throughput: our JetStream engine beside Tunix's sampler and transformers' `generate`.

Why: the engine (continuous batching over KV slots, driven by JetStream's threads) should serve at
least as fast as the static-batch samplers a user would otherwise reach for. For each model config
one set of random float32 weights (`create_model(config, seed=0)`) is written with `save_hf` and
loaded by all three:

- ours: `Engine` + JetStream `Driver` + `EngineClient`, C requests submitted at once with
  `asyncio.gather` into an engine of C slots;
- Tunix 0.1.7: `tunix.generate.sampler.Sampler` over `tunix.models.qwen3`, one batch of C;
- transformers: `AutoModelForCausalLM.from_pretrained` (torch CPU), `generate` on one batch of C.

Each run is greedy over the same C prompts of `--prompt-len` random token ids and produces exactly
`--new-tokens` tokens per sequence (no stop token is set anywhere; produced tokens are counted).

What the numbers mean: tok/s = generated tokens / wall seconds of one call that generates all of
them, prefill included, after a warm-up call of the same shape (the fastest of `--repeats` timed
calls: on a shared machine the slower ones measure its neighbours too); the warm-up time (mostly XLA
compilation for the two JAX samplers) is reported apart. A ratio above 1 means ours is faster.
The agreement table checks that the three compute the same function: max |Δ logits| of one forward
pass over a prompt against our model, and the mean number of leading greedy tokens equal to ours.
Tunix 0.1.7's Qwen3 ignores `rope_theta` (it always uses 1e6): its logits are reported as shipped,
then the config's θ is passed through (same cost) so that configs with another θ compare too.

Install, in a venv of its own beside the project's (JetStream and Tunix go in without their
declared dependencies, which bring TensorFlow and dataset tooling; the `serve` and `bench` extras
hold what their driver, Qwen3 and sampler really import):

  python3 -m venv ../bench-venv && ../bench-venv/bin/pip install -e '.[test,serve,bench]'
  ../bench-venv/bin/pip install --no-deps google-jetstream==0.2.2 google-tunix==0.1.7

Run from the repository root (the defaults: both configs, C = 1, 8, 16, 32, 64 new tokens, one
warm-up and two timed calls per cell; see bench/README.md for the run time), or a quick check:

  ../bench-venv/bin/python bench/serving_throughput.py
  ../bench-venv/bin/python bench/serving_throughput.py --configs small --concurrency 1 8 \
      --new-tokens 8

It prints the tables and writes `results.md` and `results.json` to `--out` (default `runs/bench`).
The device is JAX's default backend; each row also gives the fraction of the device's memory
bandwidth our decode used (the bytes a step must read, weights and KV, times steps per second,
prefill time included, so a lower bound) and, for ours and Tunix, the fraction of its matmul rate
(the FLOPs the call must do over its wall time); on a CPU the peaks are measured on the spot
(`device_peaks.measured_peaks`). `--one-by-one` serves on the engine's path
before issue 16 (one prompt per prefill, one decode step per dispatch, the whole cache attended).
On an accelerator, `bench/accelerator.sh` runs the Qwen3 0.6B and 1.7B presets in bf16.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from toolorch_jax.datadir import data_path
from toolorch_jax.model import create_model, load_model_config, save_hf
from toolorch_jax.serving import Driver, Engine, EngineClient, EngineConfig, SamplingParams
from toolorch_jax.serving.engine_config import SERVED_LAYOUTS
from toolorch_jax.tokenizer import SentencePieceTokenizer, train_sentencepiece

sys.path.insert(0, str(Path(__file__).parent))
from device_peaks import (current_device, decode_bytes_per_step, generate_flops,  # noqa: E402
                          peaks_line, percent)

TOKENIZER_VOCAB = 2048  # below every benchmarked model's vocabulary
PROMPT_SEED = 0


class NoStopTokenizer(SentencePieceTokenizer):
  """The engine's tokenizer with no stop ids, so every sequence runs to `--new-tokens`."""

  @property
  def stop_ids(self) -> tuple[int, ...]:
    return ()


class ModelVocabTokenizer(NoStopTokenizer):
  """`NoStopTokenizer` claiming the model's whole vocabulary: the engine never samples an id past
  its tokenizer's, where Tunix and transformers choose among all the model's ids; without this,
  ours took the argmax over the first 2,048 ids only and greedy outputs could not be compared."""

  def __init__(self, model_file: str | Path, vocab_size: int):
    super().__init__(model_file)
    self._model_vocab = vocab_size

  @property
  def vocab_size(self) -> int:
    return self._model_vocab


class IdTokenizer:
  """Tunix's sampler takes text: a prompt is its ids written out; no id is pad, BOS or EOS."""

  def __init__(self, vocab_size: int):
    self.outside = vocab_size  # never a model token: Tunix masks pad ids and stops at EOS ids

  def encode(self, text: str, **kwargs) -> list[int]:
    return [int(t) for t in text.split()]

  def decode(self, ids, **kwargs) -> str:
    return " ".join(str(int(i)) for i in ids)

  def bos_id(self):
    return None

  def eos_id(self) -> int:
    return self.outside

  def pad_id(self) -> int:
    return self.outside


def timed(fn):
  start = time.perf_counter()
  result = fn()
  return result, time.perf_counter() - start


def measure(run, repeats: int) -> dict:
  """A warm-up call, then `repeats` timed calls of the same shape; `run` returns the ids [C, N].

  The fastest call counts: the others on a shared machine measure its neighbours as well.
  """
  _, warmup = timed(run)
  calls = [timed(run) for _ in range(repeats)]
  tokens, seconds = min(calls, key=lambda call: call[1])
  count = sum(len(t) for t in tokens)
  return {"tokens": count, "seconds": seconds, "tok_s": count / seconds, "warmup_s": warmup,
          "all_seconds": [s for _, s in calls], "ids": [list(map(int, t)) for t in tokens]}


def train_tokenizer(out_dir: Path) -> NoStopTokenizer:
  with open(data_path("gsm8k/test.jsonl")) as f:
    lines = [json.loads(line)["question"] for line in f]
  return NoStopTokenizer(train_sentencepiece(lines, TOKENIZER_VOCAB, out_dir))


def make_prompts(tokenizer: SentencePieceTokenizer, count: int, length: int) -> np.ndarray:
  """Random ids of ordinary pieces: no chat, stop or pad token."""
  special = set(tokenizer.special_ids().values()) | {tokenizer.eos_id, tokenizer.pad_id, 0}
  allowed = np.array([i for i in range(tokenizer.vocab_size) if i not in special])
  return np.random.default_rng(PROMPT_SEED).choice(allowed, size=(count, length))


# ----- the three samplers -------------------------------------------------------------------------

def engine_config(slots: int, prompt_len: int, new_tokens: int, one_by_one: bool,
                  weight_layout: str = "model") -> EngineConfig:
  # No prefix reuse: the timed calls repeat the warm-up's prompts, and the samplers beside ours
  # prefill every call.
  config = EngineConfig(max_slots=slots, max_prefill_length=prompt_len,
                        max_cache_length=prompt_len + new_tokens,
                        min_prefill_bucket=min(16, prompt_len), reuse_prefixes=False,
                        weight_layout=weight_layout)
  return config.one_by_one() if one_by_one else config


def run_ours(model, tokenizer, prompts: np.ndarray, new_tokens: int, repeats: int,
             one_by_one: bool = False, weight_layout: str = "model") -> dict:
  config = engine_config(len(prompts), prompts.shape[1], new_tokens, one_by_one, weight_layout)
  engine_tokenizer = ModelVocabTokenizer(tokenizer.source, model.config.vocab_size)
  driver = Driver(Engine(model, engine_tokenizer, config))
  client = EngineClient(driver)
  greedy = SamplingParams(temperature=0.0)

  async def generate_all():
    return await asyncio.gather(*(client.generate(p.tolist(), new_tokens, greedy) for p in prompts))

  def run():
    results = asyncio.run(generate_all())
    failed = [r.error for r in results if r.finish_reason != "length"]
    if failed:
      raise RuntimeError(f"engine requests did not run to max_tokens: {failed[:3]}")
    return [r.token_ids for r in results]

  try:
    return measure(run, repeats)
  finally:
    driver.stop()


def load_tunix(hf_dir: Path, config):
  from tunix.models.qwen3 import model as tunix_qwen3
  from tunix.models.qwen3 import params as tunix_params

  tunix_config = tunix_qwen3.ModelConfig(
      num_layers=config.num_layers, vocab_size=config.vocab_size, embed_dim=config.hidden_size,
      hidden_dim=config.intermediate_size, num_heads=config.num_heads, head_dim=config.head_dim,
      num_kv_heads=config.num_kv_heads, rope_theta=config.rope_theta, norm_eps=config.rms_norm_eps,
      use_tied_embedding=config.tie_word_embeddings)
  return tunix_params.create_model_from_safe_tensors(str(hf_dir), tunix_config, dtype=jnp.float32)


@functools.cache
def _shipped_apply_rope():
  from tunix.models.qwen3 import model as tunix_qwen3
  return tunix_qwen3.apply_rope


def set_tunix_rope_theta(theta: float | None) -> None:
  """Tunix 0.1.7's attention calls `apply_rope` without the config's θ (so 1e6): pass `theta` to
  it, or with None restore the function as shipped."""
  from tunix.models.qwen3 import model as tunix_qwen3
  shipped = _shipped_apply_rope()
  tunix_qwen3.apply_rope = (shipped if theta is None
                            else functools.partial(shipped, rope_theta=theta))


def tunix_logits(model, prompt: np.ndarray) -> np.ndarray:
  length = len(prompt)
  mask = jnp.tril(jnp.ones((1, length, length), bool))
  logits, _ = model(jnp.asarray(prompt[None], jnp.int32), jnp.arange(length)[None], None, mask)
  return np.asarray(logits[0])


def run_tunix(sampler, prompts: np.ndarray, new_tokens: int, vocab_size: int,
              repeats: int) -> dict:
  texts = [" ".join(map(str, p)) for p in prompts]

  def run():
    out = sampler(texts, max_generation_steps=new_tokens, max_prompt_length=prompts.shape[1],
                  eos_tokens=[vocab_size], temperature=0.0)
    return out.tokens

  return measure(run, repeats)


def run_transformers(model, prompts: np.ndarray, new_tokens: int, repeats: int) -> dict:
  import torch

  input_ids = torch.as_tensor(prompts, dtype=torch.long)
  mask = torch.ones_like(input_ids)

  def run():
    with torch.inference_mode():
      out = model.generate(input_ids, attention_mask=mask, max_new_tokens=new_tokens,
                           min_new_tokens=new_tokens, do_sample=False)
    return out[:, prompts.shape[1]:].numpy()

  return measure(run, repeats)


def load_transformers(hf_dir: Path, pad_id: int):
  import torch
  from transformers import AutoModelForCausalLM

  model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
  model.generation_config.eos_token_id = None  # no stop: every row generates --new-tokens
  model.generation_config.pad_token_id = pad_id
  return model


# ----- one model config ---------------------------------------------------------------------------

def common_prefix(a, b) -> int:
  n = 0
  for x, y in zip(a, b):
    if x != y:
      break
    n += 1
  return n


def agreement(ours: dict, other: dict) -> float:
  """Mean number of leading generated tokens equal to ours, over the prompts of one run."""
  return float(np.mean([common_prefix(a, b) for a, b in zip(ours["ids"], other["ids"])]))


def bench_config(name: str, args, tokenizer, work: Path) -> dict:
  config = load_model_config(name)
  model = create_model(config, seed=0)
  hf_dir = work / name
  if not (args.skip_tunix and args.skip_transformers):
    save_hf(model, config, hf_dir, dtype="float32")
  prompts = make_prompts(tokenizer, max(args.concurrency), args.prompt_len)
  ours_logits, _ = model(jnp.asarray(prompts[:1], jnp.int32), jnp.arange(args.prompt_len)[None])
  ours_logits = np.asarray(ours_logits[0])
  report = {"config": name, "params": config.num_params, "rope_theta": config.rope_theta,
            "dtype": config.dtype, "runs": [], "logits_max_abs_diff": {}}

  tunix_sampler = hf_model = None
  if not args.skip_tunix:
    try:
      from tunix.generate import sampler as tunix_sampler_lib
    except ImportError as err:
      raise SystemExit(f"Tunix is missing ({err}): pip install -e '.[test,serve,bench]' &&"
                       " pip install --no-deps google-tunix==0.1.7, or pass --skip-tunix") from err

    tunix_model = load_tunix(hf_dir, config)
    set_tunix_rope_theta(None)
    report["logits_max_abs_diff"]["tunix_as_shipped"] = float(
        np.abs(tunix_logits(tunix_model, prompts[0]) - ours_logits).max())
    set_tunix_rope_theta(config.rope_theta)
    report["logits_max_abs_diff"]["tunix"] = float(
        np.abs(tunix_logits(tunix_model, prompts[0]) - ours_logits).max())
    tunix_sampler = tunix_sampler_lib.Sampler(
        tunix_model, IdTokenizer(config.vocab_size),
        tunix_sampler_lib.CacheConfig(cache_size=args.prompt_len + args.new_tokens,
                                      num_layers=config.num_layers,
                                      num_kv_heads=config.num_kv_heads, head_dim=config.head_dim))
  if not args.skip_transformers:
    import torch

    hf_model = load_transformers(hf_dir, tokenizer.pad_id)
    with torch.inference_mode():
      hf_logits = hf_model(torch.as_tensor(prompts[:1], dtype=torch.long)).logits[0].numpy()
    report["logits_max_abs_diff"]["transformers"] = float(np.abs(hf_logits - ours_logits).max())

  for c in args.concurrency:
    batch = prompts[:c]
    run = {"concurrency": c,
           "ours": run_ours(model, tokenizer, batch, args.new_tokens, args.repeats, args.one_by_one,
                            args.weight_layout)}
    steps_per_s = run["ours"]["tok_s"] / c
    step_bytes = decode_bytes_per_step(config, c, args.prompt_len + args.new_tokens / 2)
    run["ours"]["bandwidth_fraction"] = args.device.bandwidth_fraction(steps_per_s * step_bytes)
    if tunix_sampler is not None:
      run["tunix"] = run_tunix(tunix_sampler, batch, args.new_tokens, config.vocab_size,
                               args.repeats)
      run["agree_tunix"] = agreement(run["ours"], run["tunix"])
    if hf_model is not None:
      run["transformers"] = run_transformers(hf_model, batch, args.new_tokens, args.repeats)
      run["agree_transformers"] = agreement(run["ours"], run["transformers"])
    flops = generate_flops(config, c, args.prompt_len, args.new_tokens)
    for sampler in ("ours", "tunix"):  # on the device; transformers runs on the CPU
      if sampler in run:
        call_seconds = c * args.new_tokens / run[sampler]["tok_s"]
        run[sampler]["flops_fraction"] = args.device.mfu(flops / call_seconds)
    print(f"  {name} C={c}: " + ", ".join(
        f"{k} {run[k]['tok_s']:.1f} tok/s (warm-up {run[k]['warmup_s']:.1f} s)"
        for k in ("ours", "tunix", "transformers") if k in run), flush=True)
    report["runs"].append(run)
  return report


# ----- report -------------------------------------------------------------------------------------

def _cell(value, fmt: str) -> str:
  return "—" if value is None else format(value, fmt)


def tables(reports: list[dict], prompt_len: int, new_tokens: int, device) -> str:
  lines = [peaks_line(device), "",
           "| config | params | dtype | concurrency | tok/s ours | ours mem BW | ours FLOP/s"
           " | tok/s Tunix | Tunix FLOP/s | tok/s transformers | ours/Tunix | ours/transformers |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
  for rep in reports:
    for run in rep["runs"]:
      ours = run["ours"]["tok_s"]
      tunix = run.get("tunix", {}).get("tok_s")
      hf = run.get("transformers", {}).get("tok_s")
      tunix_flops = percent(run["tunix"]["flops_fraction"]) if tunix else "—"
      lines.append(
          f"| {rep['config']} | {rep['params'] / 1e6:.1f}M | {rep['dtype']} | {run['concurrency']}"
          f" | {ours:.1f} | {percent(run['ours']['bandwidth_fraction'])}"
          f" | {percent(run['ours']['flops_fraction'])} | {_cell(tunix, '.1f')} | {tunix_flops}"
          f" | {_cell(hf, '.1f')}"
          f" | {_cell(tunix and ours / tunix, '.2f')} | {_cell(hf and ours / hf, '.2f')} |")
  lines += ["", "Mem BW and FLOP/s: the share of the device's peak (above) that the least bytes"
            " a decode step must read, and the least matmul FLOPs the call must do"
            " (`device_peaks.generate_flops`), reach at the measured tok/s, prefill included."]
  lines += ["", "Warm-up (compile) seconds, ours / Tunix / transformers:", ""]
  for rep in reports:
    for run in rep["runs"]:
      warm = " / ".join(_cell(run.get(k, {}).get("warmup_s"), ".1f")
                        for k in ("ours", "tunix", "transformers"))
      lines.append(f"- {rep['config']}, C={run['concurrency']}: {warm}")
  lines += ["", f"Same computation: max abs difference of the logits of one {prompt_len}-token"
            " prompt against ours, and the leading greedy tokens equal to ours (mean over the"
            f" prompts, of {new_tokens}) at each concurrency; random weights make greedy decoding"
            " repeat itself, so the distinct ids per generated sequence (ours) are shown too:", "",
            "| config | θ | Tunix as shipped | Tunix, θ passed | transformers | C | = Tunix"
            " | = transformers | distinct ids |", "|---|---:|---:|---:|---:|---|---|---|---|"]
  for rep in reports:
    diffs, runs = rep["logits_max_abs_diff"], rep["runs"]
    agree = {k: " / ".join(_cell(run.get(f"agree_{k}"), "g") for run in runs)
             for k in ("tunix", "transformers")}
    distinct = " / ".join(format(np.mean([len(set(ids)) for ids in run["ours"]["ids"]]), ".1f")
                          for run in runs)
    lines.append(
        f"| {rep['config']} | {rep['rope_theta']:g} | {_cell(diffs.get('tunix_as_shipped'), '.1e')}"
        f" | {_cell(diffs.get('tunix'), '.1e')} | {_cell(diffs.get('transformers'), '.1e')}"
        f" | {' / '.join(str(run['concurrency']) for run in runs)} | {agree['tunix']}"
        f" | {agree['transformers']} | {distinct} |")
  return "\n".join(lines) + "\n"


def versions() -> dict:
  from importlib.metadata import PackageNotFoundError, version

  found = {}
  for package in ("jax", "flax", "google-jetstream", "google-tunix", "torch", "transformers"):
    try:
      found[package] = version(package)
    except PackageNotFoundError:
      pass
  return found


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--configs", nargs="+", default=["small", "qwen3-100m"],
                      help="model presets or YAML files")
  parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 8, 16, 32],
                      help="sequences generated together")
  parser.add_argument("--new-tokens", type=int, default=64, help="generated per sequence")
  parser.add_argument("--prompt-len", type=int, default=32, help="random prompt ids per sequence")
  parser.add_argument("--repeats", type=int, default=2,
                      help="timed calls per cell; the fastest counts")
  parser.add_argument("--skip-tunix", action="store_true")
  parser.add_argument("--skip-transformers", action="store_true")
  parser.add_argument("--one-by-one", action="store_true",
                      help="serve on the engine's path before issue 16 (a before/after comparison)")
  parser.add_argument("--weight-layout", choices=SERVED_LAYOUTS, default="model",
                      help="EngineConfig.weight_layout of our engine (model: as the model stores them)")
  parser.add_argument("--out", type=Path, default=Path("runs/bench"),
                      help="folder for results.md and results.json")
  args = parser.parse_args(argv)

  start = time.perf_counter()
  args.device = current_device()
  environment = {"platform": platform.platform(), "cpus": os.cpu_count(),
                 "load_average_at_start": os.getloadavg(), "devices": str(jax.devices()),
                 "device": args.device.to_dict(), "versions": versions()}
  with tempfile.TemporaryDirectory() as tmp:
    work = Path(tmp)
    tokenizer = train_tokenizer(work / "tokenizer")
    reports = []
    for name in args.configs:
      print(f"{name}:", flush=True)
      reports.append(bench_config(name, args, tokenizer, work))
  table = tables(reports, args.prompt_len, args.new_tokens, args.device)
  elapsed = time.perf_counter() - start
  print("\n" + table + f"\nTotal time {elapsed:.0f} s.")
  args.out.mkdir(parents=True, exist_ok=True)
  settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
              if k != "device"}
  (args.out / "results.md").write_text(table)
  (args.out / "results.json").write_text(json.dumps(
      {"settings": settings, "environment": environment, "total_seconds": elapsed,
       "configs": reports}, indent=1) + "\n")
  print(f"wrote {args.out / 'results.md'} and {args.out / 'results.json'}")


if __name__ == "__main__":
  main()
