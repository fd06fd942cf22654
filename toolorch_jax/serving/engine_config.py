"""The engine's sizes, apart from the engine so that they can be read without JetStream."""

from __future__ import annotations

import dataclasses

from toolorch_jax.serving.sampling import SamplingParams


@dataclasses.dataclass(frozen=True)
class EngineConfig:
  """How many sequences the engine decodes together, and how long they may be."""

  max_slots: int = 32  # sequences decoded together
  max_prefill_length: int = 1024  # longest prompt
  max_cache_length: int = 2048  # prompt + generated tokens per slot
  min_prefill_bucket: int = 16  # prompts are padded to the next power of two from here
  default_sampling: SamplingParams = SamplingParams(temperature=0.0)  # for requests without settings

  def __post_init__(self):
    if self.max_prefill_length > self.max_cache_length:
      raise ValueError("max_prefill_length must not exceed max_cache_length")
