"""What a tool call costs and how long a model takes: the one place prices turn into dollars.

ToolOrchestra's efficiency reward reads `cost_usd` and `latency_s` off every call, so every tool
bills through `Price.cost` and every modelled (not measured) latency comes from `LatencyModel`.
Values from YAML are range-checked by the registry, which knows the key to name.
"""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass
class Price:
  """A list price in USD; a call pays every part that applies to it."""

  per_call: float = 0.0
  per_second: float = 0.0          # e.g. a code interpreter's compute
  per_mtok_input: float = 0.0      # per million prompt tokens
  per_mtok_output: float = 0.0     # per million completion tokens

  def cost(self, *, seconds: float = 0.0, input_tokens: int = 0, output_tokens: int = 0) -> float:
    return (self.per_call + self.per_second * seconds + self.per_mtok_input * input_tokens / 1e6
            + self.per_mtok_output * output_tokens / 1e6)


@dataclasses.dataclass
class LatencyModel:
  """Latency of a model we do not call (a recorded response): time to first token + decoding."""

  first_token_s: float = 0.5
  output_tokens_per_s: float = 50.0

  def latency_s(self, output_tokens: int) -> float:
    return self.first_token_s + output_tokens / self.output_tokens_per_s


def estimate_tokens(text: str, chars_per_token: float = 4.0) -> int:
  """Token count of text whose tokenizer we do not have (OpenAI's rule of thumb: ~4 chars/token)."""
  return math.ceil(len(text) / chars_per_token) if text else 0
