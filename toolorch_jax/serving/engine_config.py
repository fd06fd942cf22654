"""The engine's sizes, apart from the engine so that they can be read without JetStream."""

from __future__ import annotations

import dataclasses

from toolorch_jax.serving.sampling import SamplingParams


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
    for name in ("max_slots", "max_prefill_length", "min_prefill_bucket", "prefill_batch",
                 "prefill_batch_tokens", "decode_steps", "min_attention_length"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
