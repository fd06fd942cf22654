"""The device JAX runs on and its peak matmul rate and memory bandwidth, so that benchmarks report
MFU (train), and the fractions of memory bandwidth and of the matmul rate (decode), against what
the device can do.

Peaks are per chip, dense (no sparsity): the vendors' bf16 datasheet figures for known accelerators.
A device kind missing from the table (a CPU, say) has no datasheet: its peaks are measured once, on
the spot, as the best rate of large float32 matmuls and of a large reduction. That
makes them attainable rates, not theoretical ones, so a fraction near 1 means no implementation of
the same computation could be much faster on this machine.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp

# (substring of jax's `device_kind`, dense bf16 FLOP/s, memory bytes/s); the first match counts.
PEAKS = [
    ("TPU v6", 918e12, 1640e9),  # v6e (Trillium)
    ("TPU v5 lite", 197e12, 819e9),  # v5e
    ("TPU v5", 459e12, 2765e9),  # v5p
    ("TPU v4", 275e12, 1228e9),
    ("H200", 989e12, 4800e9),
    ("H100 PCIe", 756e12, 2000e9),
    ("H100", 989e12, 3350e9),  # SXM
    ("A100-SXM4-40GB", 312e12, 1555e9),
    ("A100", 312e12, 2039e9),  # 80 GB
    ("L4", 121e12, 300e9),
]


@dataclasses.dataclass(frozen=True)
class Device:
  kind: str
  platform: str
  count: int
  peak_flops: float | None  # per chip
  peak_bytes_per_s: float | None  # per chip
  peak_source: str = "datasheet"  # or "measured" (no datasheet entry)

  def mfu(self, flops_per_s: float) -> float | None:
    """Model FLOP/s over the peak of every chip used."""
    return None if self.peak_flops is None else flops_per_s / (self.peak_flops * self.count)

  def bandwidth_fraction(self, bytes_per_s: float) -> float | None:
    return None if self.peak_bytes_per_s is None else bytes_per_s / (self.peak_bytes_per_s * self.count)

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


def _best_seconds(fn, *args, repeats: int = 3) -> float:
  jax.block_until_ready(fn(*args))  # compile
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    best = min(best, time.perf_counter() - start)
  return best


def measured_peaks(dtype: str = "float32", sizes=(2048, 4096),
                   read_bytes: int = 256 * 2**20) -> tuple[float, float]:
  """(FLOP/s, bytes/s) this device reaches: the best of square `dtype` matmuls of `sizes` and of
  summing a `read_bytes` array. On a shared machine the neighbours lower both, as they lower the
  benchmark itself."""
  matmul = jax.jit(jnp.matmul)
  flops = 0.0
  for n in sizes:
    a = jnp.ones((n, n), dtype)
    flops = max(flops, 2 * n**3 / _best_seconds(matmul, a, a))
  x = jnp.ones((read_bytes // 4,), jnp.float32)
  return flops, read_bytes / _best_seconds(jax.jit(jnp.sum), x)


def current_device() -> Device:
  """The default backend's first device kind, how many there are, and its peaks: the datasheet's
  if the kind is known, else measured (float32 matmuls)."""
  devices = jax.devices()
  kind = devices[0].device_kind
  peak = next(((f, b) for name, f, b in PEAKS if name.lower() in kind.lower()), None)
  if peak is not None:
    return Device(kind, devices[0].platform, len(devices), *peak)
  return Device(kind, devices[0].platform, len(devices), *measured_peaks(), "measured")


def percent(fraction: float | None) -> str:
  return "n/a" if fraction is None else f"{100 * fraction:.1f}%"


def peaks_line(device: Device) -> str:
  """One sentence for a benchmark's report: the device and where its peaks come from."""
  return (f"Device: {device.kind} x {device.count} ({device.platform});"
          f" peak {device.peak_flops / 1e9:.1f} GFLOP/s and"
          f" {device.peak_bytes_per_s / 1e9:.1f} GB/s a chip ({device.peak_source}).")


def train_flops(config, seq_len: int, trunk_tokens: int, target_tokens: int) -> float:
  """Forward and backward matmul FLOPs a train step must do at least (PaLM's count: 6 per weight,
  plus attention's 12 x layers x heads x head_dim x sequence): the trunk over `trunk_tokens` (a
  prompt shared by a group counted once), the vocabulary projection only at the `target_tokens`
  the loss is on. The embedding lookup is no matmul, and rematerialisation is not counted (MFU
  counts the model's work, not the recomputation), so no side can pass 100% by doing less."""
  unembed = config.vocab_size * config.hidden_size
  trunk = config.num_params - unembed * (1 if config.tie_word_embeddings else 2)
  attention = 12 * config.num_layers * config.num_heads * config.head_dim * seq_len
  return (6 * trunk + attention) * trunk_tokens + 6 * unembed * target_tokens


def generate_flops(config, batch: int, prompt_len: int, new_tokens: int) -> float:
  """Matmul FLOPs a call that generates `new_tokens` per sequence must do at least: the prompt and
  every generated token but the last through the trunk (2 per weight, the embedding table is a
  lookup), the vocabulary projection only where a token is drawn (the prompt's last position and
  each step), and attention over each token's context (QK and PV, 2 FLOPs a multiply-add each)."""
  unembed = config.vocab_size * config.hidden_size
  trunk = config.num_params - unembed * (1 if config.tie_word_embeddings else 2)
  through_trunk = prompt_len + new_tokens - 1
  contexts = through_trunk * (through_trunk + 1) / 2  # position t attends over t + 1 keys
  attention = 4 * config.num_layers * config.num_heads * config.head_dim * contexts
  return batch * (2 * trunk * through_trunk + 2 * unembed * new_tokens + attention)


def decode_bytes_per_step(config, batch: int, context: float) -> float:
  """Bytes a decode step must read at least: every weight once (not the embedding table, of
  which only `batch` rows are gathered, unless it is also the output layer) and each sequence's
  keys and values over `context` tokens."""
  param_bytes = jnp.dtype(config.param_dtype).itemsize
  weights = config.num_params - (0 if config.tie_word_embeddings
                                 else config.vocab_size * config.hidden_size)
  kv_per_token = 2 * config.num_layers * config.num_kv_heads * config.head_dim
  return weights * param_bytes + batch * context * kv_per_token * jnp.dtype(config.dtype).itemsize
