"""JetStream's driver for one engine, with per-request sampling settings and batched prefill.

JetStream 0.2.2 has no per-request sampling: its prefill thread hands the engine only padded
tokens. The request type here carries `SamplingParams`, and the driver passes them to the engine
with the prompt ids and the request's `max_tokens` (the engine pads to its own buckets, stops each
sequence on the device, and Qwen3 has no BOS token to add). Its prefill thread takes every request
waiting (up to the engine's `prefill_batch`) and prefills them in one `prefill_batch` call.

JetStream's generate loop has a race of its own: after finding no request for a free slot it
asserts that some slot is busy, but the detokenize thread may free the last busy one in between,
and the thread dies (every later request then waits forever; it hung a 300-step RL run at step
40). When the assertion fails every slot is free, so nothing is lost by starting the loop again
on a fresh decode state, which is what the driver does.
"""

from __future__ import annotations

import dataclasses
import logging
import queue

import numpy as np

from toolorch_jax.serving import jetstream_compat as js
from toolorch_jax.serving.engine import LIVE_PARAMS, Engine, PrefillInput
from toolorch_jax.serving.sampling import SamplingParams

logger = logging.getLogger("toolorch_jax.serving")
IDLE_RACE = "At this point we must have some requests inserted into the slots."


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
    return PrefillInput(ids, getattr(request, "sampling", None), request.max_tokens), len(ids)

  def _waiting_requests(self) -> tuple[list, bool]:
    """The next request (blocking) and those already waiting behind it; and whether to stop."""
    first = self._prefill_backlog.get(block=True)
    if first is None:
      return [], True
    requests = [first]
    while len(requests) < self.engine.config.prefill_batch:
      try:
        request = self._prefill_backlog.get_nowait()
      except queue.Empty:
        break
      if request is None:
        return requests, True
      requests.append(request)
    return requests, False

  def _generate_thread(self, idx: int):
    while True:
      try:
        return super()._generate_thread(idx)
      except AssertionError as err:
        if str(err) != IDLE_RACE or not self.live:
          raise
        logger.warning("generate loop %d lost JetStream's slot race with every slot free;"
                       " starting it again", idx)
        self.engine.stats.add(generate_restarts=1)

  def _prefill_thread(self, idx: int):
    tokenizer = self.engine.build_tokenizer(self.engine.get_tokenizer())
    transfer_backlog = self._transfer_backlogs[idx]
    stop = False
    while self.live and not stop:
      requests, stop = self._waiting_requests()
      inputs = [self._process_prefill_content(r, tokenizer, False, self.engine.max_prefill_length)[0]
                for r in requests]
      for request, prefix in zip(requests, self.engine.prefill_batch(inputs, LIVE_PARAMS)):
        request.prefill_result = prefix
        transfer_backlog.put(request, block=True)
