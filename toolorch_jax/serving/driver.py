"""JetStream's driver for one engine, with per-request sampling settings.

JetStream 0.2.2 has no per-request sampling: its prefill thread hands the engine only padded
tokens. The request type here carries `SamplingParams`, and the driver passes them to the engine
with the prompt ids (the engine pads to its own buckets; Qwen3 has no BOS token to add).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from toolorch_jax.serving import jetstream_compat as js
from toolorch_jax.serving.engine import LIVE_PARAMS, Engine, PrefillInput
from toolorch_jax.serving.sampling import SamplingParams


@dataclasses.dataclass
class GenerationRequest(js.orchestrator.ActiveRequest):
  sampling: SamplingParams | None = None


class Driver(js.orchestrator.Driver):
  """Interleaved prefill and decode on one engine, threads started on construction."""

  def __init__(self, engine: Engine):
    self.engine = engine
    super().__init__(prefill_engines=[engine], generate_engines=[engine],
                     prefill_params=[LIVE_PARAMS], generate_params=[LIVE_PARAMS],
                     interleaved_mode=True, jax_padding=False)

  def _process_prefill_content(self, request, tokenizer, is_bos, max_prefill_length):
    content = request.prefill_content
    try:
      ids = tokenizer.encode(content)[0] if isinstance(content, str) else np.asarray(content)
    except Exception:  # pylint: disable=broad-exception-caught
      ids = np.asarray([-1])  # rejected with a clear message by the engine's request check
    return PrefillInput(ids, getattr(request, "sampling", None)), len(ids)
