"""The device JAX runs on and its peak bf16 matmul rate and memory bandwidth (vendor datasheets),
so that benchmarks report MFU (train) and the fraction of memory bandwidth used (decode).

Peaks are per chip, dense (no sparsity). A device kind missing from the table (a CPU, say) has no
peak: its fractions are reported as n/a.
"""

from __future__ import annotations

import dataclasses

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

  def mfu(self, flops_per_s: float) -> float | None:
    """Model FLOP/s over the peak of every chip used."""
    return None if self.peak_flops is None else flops_per_s / (self.peak_flops * self.count)

  def bandwidth_fraction(self, bytes_per_s: float) -> float | None:
    return None if self.peak_bytes_per_s is None else bytes_per_s / (self.peak_bytes_per_s * self.count)

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


def current_device() -> Device:
  """The default backend's first device kind, how many there are, and its peaks if known."""
  devices = jax.devices()
  kind = devices[0].device_kind
  peak = next(((f, b) for name, f, b in PEAKS if name.lower() in kind.lower()), (None, None))
  return Device(kind, devices[0].platform, len(devices), *peak)


def percent(fraction: float | None) -> str:
  return "n/a" if fraction is None else f"{100 * fraction:.1f}%"


def train_flops_per_token(config, seq_len: int) -> float:
  """Forward and backward matmul FLOPs per token (PaLM's count: 6 per weight, plus attention's
  12 x layers x heads x head_dim x sequence); the embedding lookup is no matmul, and
  rematerialisation is not counted (MFU counts the model's work, not the recomputation)."""
  weights = config.num_params - (0 if config.tie_word_embeddings
                                 else config.vocab_size * config.hidden_size)
  attention = 12 * config.num_layers * config.num_heads * config.head_dim * seq_len
  return 6 * weights + attention


def decode_bytes_per_step(config, batch: int, context: float) -> float:
  """Bytes a decode step must read at least: every weight once (not the embedding table, of
  which only `batch` rows are gathered, unless it is also the output layer) and each sequence's
  keys and values over `context` tokens."""
  param_bytes = jnp.dtype(config.param_dtype).itemsize
  weights = config.num_params - (0 if config.tie_word_embeddings
                                 else config.vocab_size * config.hidden_size)
  kv_per_token = 2 * config.num_layers * config.num_kv_heads * config.head_dim
  return weights * param_bytes + batch * context * kv_per_token * jnp.dtype(config.dtype).itemsize
