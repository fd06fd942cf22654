"""The engine's sizes, apart from the engine so that they can be read without JetStream."""

from __future__ import annotations

import dataclasses

from toolorch_jax.model.config import WEIGHT_LAYOUTS, ModelConfig
from toolorch_jax.serving.sampling import SamplingParams

SERVED_LAYOUTS = ("model",) + WEIGHT_LAYOUTS  # "model": as the model given to the engine stores them


@dataclasses.dataclass(frozen=True)
class EngineConfig:
  """How many sequences the engine decodes together, how long they may be, and how it batches."""

  max_slots: int = 32  # sequences decoded together
  max_prefill_length: int = 1024  # longest prompt
  max_cache_length: int = 2048  # prompt + generated tokens per slot
  min_prefill_bucket: int = 16  # prompts are padded to the next power of two from here
  prefill_batch: int = 8  # waiting prompts prefilled together in one call (per length bucket)
  prefill_batch_tokens: int = 8192  # ... and at most this many padded tokens per call (memory)
  decode_steps: int = 8  # decode steps per dispatch, run in an on-device loop
  min_attention_length: int = 64  # decode attends over the next power of two above the used cache
  reuse_prefixes: bool = True  # a prompt extending a finished sequence's tokens reuses their KV
  prefix_store_rows: int = 0  # cache rows beside the slots keeping finished sequences for reuse
  default_sampling: SamplingParams = SamplingParams(temperature=0.0)  # for requests without settings
  # How the served weights store their projections (`ModelConfig.weight_layout`). "model" serves
  # the model's own arrays, no second copy; another layout serves a permuted copy. Which is faster
  # depends on the CPU and the batch (bench/README.md, "Weights stored [out, in] for serving"):
  # [out, in] won at every concurrency on a Xeon, only at one sequence on an EPYC.
  weight_layout: str = "model"

  def served_layout(self, model: ModelConfig) -> str:
    """The weight layout the engine serves `model` in."""
    return model.weight_layout if self.weight_layout == "model" else self.weight_layout

  def one_by_one(self) -> "EngineConfig":
    """The same sizes on the engine's simplest path: one prompt per prefill, one decode step per
    dispatch, the whole cache attended, no prefix reuse (the reference for parity tests and
    before/after benchmarks)."""
    return dataclasses.replace(self, prefill_batch=1, decode_steps=1, reuse_prefixes=False,
                               prefix_store_rows=0, min_attention_length=self.max_cache_length)

  def __post_init__(self):
    if self.prefix_store_rows < 0:
      raise ValueError(f"prefix_store_rows must be >= 0, got {self.prefix_store_rows}")
    if self.max_prefill_length > self.max_cache_length:
      raise ValueError("max_prefill_length must not exceed max_cache_length")
    if self.weight_layout not in SERVED_LAYOUTS:
      raise ValueError(f"weight_layout must be one of {SERVED_LAYOUTS}, got '{self.weight_layout}'")
    for name in ("max_slots", "max_prefill_length", "min_prefill_bucket", "prefill_batch",
                 "prefill_batch_tokens", "decode_steps", "min_attention_length"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
