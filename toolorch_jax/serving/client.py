"""Asyncio client of the in-process JetStream driver, used by rollouts and the HTTP server.

The engine returns, with each token, its sampling log-prob (under the distribution actually
sampled from: temperature, top-k, top-p) and the policy version whose forward pass produced it.
"""

from __future__ import annotations

import dataclasses
from typing import AsyncIterator, Sequence

from toolorch_jax.serving import jetstream_compat as js
from toolorch_jax.serving.driver import Driver, GenerationRequest
from toolorch_jax.serving.sampling import SamplingParams


class RequestError(ValueError):
  """A request the engine cannot serve; the message says why."""


@dataclasses.dataclass
class Generation:
  prompt_length: int
  token_ids: list[int] = dataclasses.field(default_factory=list)
  logprobs: list[float] = dataclasses.field(default_factory=list)
  versions: list[int] = dataclasses.field(default_factory=list)  # per token
  finish_reason: str | None = None  # stop | length | error
  error: str | None = None

  @property
  def policy_versions(self) -> list[int]:
    """Every policy version that produced part of this sequence."""
    return sorted(set(self.versions))


class EngineClient:
  def __init__(self, driver: Driver):
    self.driver = driver
    self.engine = driver.engine

  def check(self, prompt_ids: Sequence[int], max_tokens: int, sampling: SamplingParams | None) -> None:
    """Raises RequestError for a request the engine would reject."""
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
      raise RequestError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    problem = self.engine.check_request(prompt_ids)
    if problem:
      raise RequestError(problem)
    try:
      (sampling or SamplingParams()).validate()
    except ValueError as err:
      raise RequestError(str(err)) from None

  async def stream(self, prompt_ids: Sequence[int], max_tokens: int,
                   sampling: SamplingParams | None = None) -> AsyncIterator[js.TokenSample]:
    """Yields one `TokenSample` per decode dispatch (up to `decode_steps` tokens); the last one has
    `finish_reason` set."""
    self.check(prompt_ids, max_tokens, sampling)
    channel = js.async_multifuture.AsyncMultifuture()
    request = GenerationRequest(max_tokens=max_tokens, return_channel=channel,
                                prefill_content=[int(i) for i in prompt_ids],
                                is_client_side_tokenization=True, sampling=sampling)
    self.driver.place_request_on_prefill_queue(request)
    try:
      async for samples in channel:
        yield samples[0]
    finally:
      if not channel.done():
        channel.cancel()  # the consumer stopped early: the driver frees the slot

  async def generate(self, prompt_ids: Sequence[int], max_tokens: int,
                     sampling: SamplingParams | None = None) -> Generation:
    result = Generation(prompt_length=len(prompt_ids))
    async for sample in self.stream(prompt_ids, max_tokens, sampling):
      result.token_ids += sample.token_ids
      result.logprobs += sample.logprobs
      result.versions += sample.versions
      if sample.finish_reason:
        result.finish_reason, result.error = sample.finish_reason, sample.error
    return result
