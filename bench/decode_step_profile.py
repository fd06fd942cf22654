"""Where a served decode's time goes (not a test), on the serving benchmark's shapes.

For each config, with the engine `serving_throughput.py` times (same random weights, prompts and
engine settings) but called directly, without JetStream's driver threads:

- phases: one call for C prompts split into `prefill_batch` calls, `insert` calls and `generate`
  dispatches (best of `--repeats`, after a warm-up);
- a static loop: the same model run as a bare `fori_loop` of greedy steps over a batched
  prefill, no engine: what a decode step costs with no slots, stops, streaming or log-probs;
- operations: a `jax.profiler` trace of the generate dispatches, each compiled operation's time
  charged to the Python function and JAX operation it was lowered from (from the compiled HLO's
  stack frames), per decode step;
- prefill batch invariance: row 0's cache and logits prefilled alone against in batches of other
  sizes, bit for bit. The engine prefills one row at a time inside one program (`lax.map`) so
  that a prompt's numbers never depend on which others arrived with it; this shows whether a
  batched prefill would keep that on this device.

  PYTHONPATH=$PWD python bench/decode_step_profile.py --configs small qwen3-100m --out runs/bench/decode
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import glob
import gzip
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from toolorch_jax.model import create_model, load_model_config
from toolorch_jax.serving import Engine, SamplingParams
from toolorch_jax.serving.engine import PrefillInput
from toolorch_jax.serving.engine_config import SERVED_LAYOUTS

sys.path.insert(0, str(Path(__file__).parent))
from device_peaks import current_device, generate_flops, peaks_line  # noqa: E402
from serving_throughput import (ModelVocabTokenizer, engine_config, make_prompts,  # noqa: E402
                                train_tokenizer)

GREEDY = SamplingParams(temperature=0.0)
HOST_EVENTS = ("$", "Thunk", "Pjit", "PjRt", "Cpu", "Task", "Slinky", "Fusion", "Codegen", "Jit",
               "backend", "Common", "Parse", "Device", "while")


@dataclasses.dataclass
class Phases:
  prefill_s: float
  insert_s: float
  generate_s: float
  dispatches: int

  @property
  def total_s(self) -> float:
    return self.prefill_s + self.insert_s + self.generate_s


def prefill_and_insert(engine: Engine, prompts: np.ndarray, new_tokens: int):
  """A decode state with every prompt in a slot, and the seconds of both phases."""
  state = jax.block_until_ready(engine.init_decode_state())
  start = time.perf_counter()
  requests = [PrefillInput(p, GREEDY, new_tokens) for p in prompts]
  per_call = engine.config.prefill_batch
  prefixes = [prefix for first in range(0, len(requests), per_call)
              for prefix in engine.prefill_batch(requests[first:first + per_call])]
  jax.block_until_ready([p.logits for p in prefixes])
  prefilled = time.perf_counter()
  for slot, prefix in enumerate(prefixes):
    state = engine.insert(prefix, state, slot)
  jax.block_until_ready(state.logits)
  return state, prefilled - start, time.perf_counter() - prefilled


def decode(engine: Engine, state, new_tokens: int) -> tuple[object, int]:
  """Generate dispatches until every slot has its tokens; the state and the dispatch count."""
  dispatches = -(-new_tokens // engine.config.decode_steps)
  for _ in range(dispatches):
    state, result = engine.generate(None, state)
    np.asarray(result.data)  # what the driver's detokenize thread reads
  return state, dispatches


def call_phases(engine: Engine, prompts: np.ndarray, new_tokens: int, repeats: int) -> Phases:
  best = None
  for _ in range(repeats + 1):  # the first call compiles
    state, prefill_s, insert_s = prefill_and_insert(engine, prompts, new_tokens)
    start = time.perf_counter()
    _, dispatches = decode(engine, state, new_tokens)
    phases = Phases(prefill_s, insert_s, time.perf_counter() - start, dispatches)
    best = phases if best is None or phases.total_s < best.total_s else best
  return best


def batched_prefill(model, tokens: jax.Array, cache_length: int):
  """The bare model's prefill of every row at once: (last position's logits [B, V], cache)."""
  batch, length = tokens.shape
  positions = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), (batch, length))
  logits, cache = model(tokens, positions, model.init_cache(batch, cache_length),
                        logits_at=jnp.full((batch,), length - 1))
  return logits[:, 0], cache


def static_loop_seconds(model, prompts: np.ndarray, new_tokens: int, repeats: int) -> float:
  """Seconds of `new_tokens` greedy steps of the bare model in one program, prefill excluded."""
  batch, length = prompts.shape
  prefill = lambda tokens: batched_prefill(model, tokens, length + new_tokens)

  def generate(tokens):
    def step(i, carry):
      logits, cache = carry
      token = jnp.argmax(logits, axis=-1).astype(jnp.int32)
      logits, cache = model(token[:, None], jnp.full((batch, 1), length + i, jnp.int32), cache)
      return logits[:, 0], cache
    return jax.lax.fori_loop(0, new_tokens, step, prefill(tokens))[0]

  prefill_fn, generate_fn = jax.jit(lambda t: prefill(t)[0]), jax.jit(generate)
  tokens = jnp.asarray(prompts, jnp.int32)
  jax.block_until_ready((prefill_fn(tokens), generate_fn(tokens)))
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(prefill_fn(tokens))
    middle = time.perf_counter()
    jax.block_until_ready(generate_fn(tokens))
    best = min(best, (time.perf_counter() - middle) - (middle - start))
  return best


def op_sources(hlo_text: str) -> dict[str, str]:
  """Compiled instruction name -> "innermost Python function: JAX operation" from the HLO's
  metadata (op_name and stack_frame_id) and its stack frame tables."""
  def table(name: str) -> str:
    match = re.search(rf"^{name}\n(.*?)(?:\n\n|\n[A-Z])", hlo_text, re.S | re.M)
    return match.group(1) if match else ""

  functions = dict(re.findall(r'^(\d+) "(.*)"$', table("FunctionNames"), re.M))
  locations = dict(re.findall(r"^(\d+) \{file_name_id=\d+ function_name_id=(\d+)", table("FileLocations"), re.M))
  frames = dict(re.findall(r"^(\d+) \{file_location_id=(\d+)", table("StackFrames"), re.M))
  sources = {}
  for name, op_name, frame in re.findall(
      r'%(\S+) = .*?op_name="([^"]+)"(?: stack_frame_id=(\d+))?', hlo_text):
    function = functions.get(locations.get(frames.get(frame, ""), ""), "?")
    parts = op_name.split("/")
    op = parts[-1] if len(parts) < 2 or "->" not in parts[-2] else f"{parts[-2]} {parts[-1]}"
    sources[name] = f"{function}: {op}"
  return sources


def traced_ops(engine: Engine, prompts: np.ndarray, new_tokens: int, trace_dir: Path) -> dict:
  """ms per decode step by source, from a profiler trace of one call's generate dispatches."""
  state, _, _ = prefill_and_insert(engine, prompts, new_tokens)
  # Record the attention buckets the engine picks (each its own program) as it dispatches.
  generate_fn, attends = engine._generate_fn, set()  # pylint: disable=protected-access

  def recording(*args, attend: int):
    attends.add(attend)
    return generate_fn(*args, attend=attend)

  engine._generate_fn = recording  # pylint: disable=protected-access
  try:
    with jax.profiler.trace(str(trace_dir), create_perfetto_trace=True):
      state, _ = decode(engine, state, new_tokens)
  finally:
    engine._generate_fn = generate_fn  # pylint: disable=protected-access
  # The programs' instruction names coincide, so a name is attributed only where every program
  # agrees on its source.
  params, version = engine._params(None)  # pylint: disable=protected-access
  sources: dict[str, str] = {}
  for attend in sorted(attends):
    hlo = generate_fn.lower(params, state, jnp.int32(version), attend=attend).compile().as_text()
    for name, source in op_sources(hlo).items():
      sources[name] = source if sources.get(name, source) == source else "?: differs by bucket"
  trace = sorted(glob.glob(str(trace_dir / "**" / "*.trace.json.gz"), recursive=True))[-1]
  micros = collections.Counter()
  for event in json.load(gzip.open(trace))["traceEvents"]:
    if event.get("ph") == "X" and not event["name"].startswith(HOST_EVENTS):
      micros[sources.get(event["name"], f"?: {re.sub(r'[.][0-9]+$', '', event['name'])}")] += event["dur"]
  return {source: us / 1000 / new_tokens for source, us in micros.most_common()}


def prefill_invariance(model, prompts: np.ndarray, sizes: tuple[int, ...]) -> list[dict]:
  """Row 0 prefilled in batches of `sizes` (of the first prompts) against alone, bit for bit."""
  length = prompts.shape[1]

  @jax.jit
  def prefill(tokens):
    logits, cache = batched_prefill(model, tokens, length)
    return logits[0], cache.keys[-1][0], cache.values[-1][0]

  alone = [np.asarray(a) for a in prefill(jnp.asarray(prompts[:1], jnp.int32))]
  rows = []
  for size in sizes:
    batched = [np.asarray(a) for a in prefill(jnp.asarray(prompts[:size], jnp.int32))]
    rows.append({"batch": size,
                 "equal": {name: bool(np.array_equal(a, b))
                           for name, a, b in zip(("logits", "keys", "values"), alone, batched)},
                 "max_abs_diff": max(float(np.abs(a - b).max()) for a, b in zip(alone, batched))})
  return rows


def profile_config(name: str, args, tokenizer, work: Path) -> dict:
  config = load_model_config(name)
  model = create_model(config, seed=0)
  prompts = make_prompts(tokenizer, args.concurrency, args.prompt_len)
  engine = Engine(model, ModelVocabTokenizer(tokenizer.source, config.vocab_size),
                  engine_config(args.concurrency, args.prompt_len, args.new_tokens, False,
                                args.weight_layout))
  phases = call_phases(engine, prompts, args.new_tokens, args.repeats)
  loop_s = static_loop_seconds(model, prompts, args.new_tokens, args.repeats)
  ops = traced_ops(engine, prompts, args.new_tokens, work / f"trace-{name}")
  flops = generate_flops(config, args.concurrency, args.prompt_len, args.new_tokens)
  report = {"config": name, "concurrency": args.concurrency, "phases": dataclasses.asdict(phases),
            "tok_s": args.concurrency * args.new_tokens / phases.total_s,
            "call_flops_fraction": args.device.mfu(flops / phases.total_s),
            "static_loop_step_ms": 1000 * loop_s / args.new_tokens,
            "engine_step_ms": 1000 * phases.generate_s / args.new_tokens,
            "ops_ms_per_step": ops,
            "prefill_invariance": prefill_invariance(model, prompts, args.invariance_batches)}
  print(f"  {name}: {report['tok_s']:.0f} tok/s, engine step {report['engine_step_ms']:.2f} ms,"
        f" static loop step {report['static_loop_step_ms']:.2f} ms", flush=True)
  return report


def tables(reports: list[dict], args) -> str:
  lines = [peaks_line(args.device), "",
           f"C = {args.concurrency}, {args.prompt_len}-token prompts, {args.new_tokens} new tokens,"
           " the engine called without the driver; seconds, best of "
           f"{args.repeats} calls.", "",
           "| config | prefill s | insert s | generate s (dispatches) | tok/s | FLOP/s of peak |"
           " engine step ms | static loop step ms |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
  for r in reports:
    p = r["phases"]
    fraction = r["call_flops_fraction"]
    lines.append(f"| {r['config']} | {p['prefill_s']:.3f} | {p['insert_s']:.3f} |"
                 f" {p['generate_s']:.3f} ({p['dispatches']}) | {r['tok_s']:.0f} |"
                 f" {'n/a' if fraction is None else f'{100 * fraction:.1f}%'} |"
                 f" {r['engine_step_ms']:.2f} | {r['static_loop_step_ms']:.2f} |")
  for r in reports:
    total = sum(r["ops_ms_per_step"].values())
    lines += ["", f"Generate program of `{r['config']}`, device time per decode step by source"
              f" (sum {total:.2f} ms; ops on both cores overlap, so the sum can exceed the wall"
              " time):", "", "| source: operation | ms per step | share |", "|---|---:|---:|"]
    for source, ms in list(r["ops_ms_per_step"].items())[:args.top]:
      lines.append(f"| {source} | {ms:.3f} | {100 * ms / total:.1f}% |")
  lines += ["", "Prefill batch invariance (row 0 alone against in a batch; bit for bit):", "",
            "| config | batch | logits | keys | values | max abs diff |", "|---|---:|---|---|---|---:|"]
  for r in reports:
    for row in r["prefill_invariance"]:
      eq = row["equal"]
      lines.append(f"| {r['config']} | {row['batch']} | {eq['logits']} | {eq['keys']} |"
                   f" {eq['values']} | {row['max_abs_diff']:.1e} |")
  return "\n".join(lines) + "\n"


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--configs", nargs="+", default=["small", "qwen3-100m"])
  parser.add_argument("--concurrency", type=int, default=32)
  parser.add_argument("--prompt-len", type=int, default=32)
  parser.add_argument("--new-tokens", type=int, default=64)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--invariance-batches", type=int, nargs="+", default=[2, 8, 16, 32])
  parser.add_argument("--top", type=int, default=16, help="sources listed per config")
  parser.add_argument("--weight-layout", choices=SERVED_LAYOUTS, default="model",
                      help="EngineConfig.weight_layout of the engine profiled (model: as the model stores them)")
  parser.add_argument("--out", default="runs/bench/decode")
  args = parser.parse_args(argv)
  args.device = current_device()
  out = Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory() as tmp:
    tokenizer = train_tokenizer(Path(tmp) / "tokenizer")
    reports = [profile_config(name, args, tokenizer, Path(tmp)) for name in args.configs]
  text = tables(reports, args)
  (out / "results.md").write_text(text)
  (out / "results.json").write_text(json.dumps(reports, indent=1))
  print(text)


if __name__ == "__main__":
  main()
