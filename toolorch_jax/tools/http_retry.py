"""JSON over HTTP with bounded retries: what the LLM experts and web search share.

ToolOrchestra's release retried failed API calls forever; an RL rollout would rather see an error
after a few seconds. Retried: 429, 5xx, connection errors (refused, dropped), timeouts and bodies
that do not parse. Not retried: other 4xx (the request itself is wrong). Delays grow
exponentially with jitter, and honour Retry-After up to the cap.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from typing import Any, Callable, Mapping

import httpx

from toolorch_jax.config import ConfigError
from toolorch_jax.tools.base import ToolError

BODY_SNIPPET = 200


@dataclasses.dataclass
class RetryPolicy:
  """How hard to try one request."""

  max_attempts: int = 4
  backoff_s: float = 0.5       # delay before the first retry; doubles each time, with jitter
  max_backoff_s: float = 8.0
  timeout_s: float = 60.0      # per attempt (connect, write, read)

  def __post_init__(self):
    if self.max_attempts < 1 or self.backoff_s < 0 or self.max_backoff_s < 0 or self.timeout_s <= 0:
      raise ConfigError("retry: need max_attempts >= 1, backoff_s and max_backoff_s >= 0 and"
                        f" timeout_s > 0; got {self}")

  def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
    """Equal jitter: half the exponential step fixed, half random, so clients spread out."""
    step = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
    delay = step / 2 + rng.uniform(0, step / 2)
    return max(delay, min(retry_after, self.max_backoff_s)) if retry_after else delay


@dataclasses.dataclass
class Reply:
  value: Any              # what `parse` made of the body
  attempts: int
  failures: list[str]     # one line per failed attempt, oldest first


def _retry_after(response: httpx.Response) -> float | None:
  try:
    return float(response.headers.get("retry-after", ""))
  except ValueError:
    return None


def _redact(text: str, headers: Mapping[str, str]) -> str:
  """Header values (API keys) never reach an error message, whatever a server echoes back."""
  for value in headers.values():
    secret = value.split()[-1] if value else ""
    if len(secret) >= 8:
      text = text.replace(secret, "[redacted]")
  return text


async def post_json(url: str, payload: Any, *, headers: Mapping[str, str], policy: RetryPolicy,
                    parse: Callable[[Any], Any] = lambda body: body,
                    rng: random.Random | None = None) -> Reply:
  """POSTs `payload` and returns `parse(JSON body)`; ToolError once retries are spent.

  `parse` raises ValueError (or KeyError, TypeError) for a body it cannot use, which counts as a
  malformed response and is retried like a 5xx.
  """
  rng = rng or random.Random()
  failures: list[str] = []
  async with httpx.AsyncClient(timeout=policy.timeout_s) as client:
    for attempt in range(1, policy.max_attempts + 1):
      retry_after = None
      try:
        response = await client.post(url, json=payload, headers=dict(headers))
      except httpx.TimeoutException as err:
        failure = f"timeout after {policy.timeout_s:g} s ({type(err).__name__})"
      except httpx.TransportError as err:
        failure = f"connection error ({type(err).__name__}: {err})"
      else:
        status, body = response.status_code, response.text[:BODY_SNIPPET]
        if status == 429 or status >= 500:
          failure = f"HTTP {status}: {body}"
          retry_after = _retry_after(response)
        elif status >= 400:
          failures.append(_redact(f"HTTP {status}: {body}", headers))
          raise ToolError(f"{url} refused the request: {failures[-1]}",
                          metadata={"attempts": attempt, "failures": failures})
        else:
          try:
            return Reply(parse(response.json()), attempt, failures)
          except (ValueError, KeyError, TypeError, IndexError) as err:
            failure = f"malformed response ({type(err).__name__}: {err}): {body}"
      failures.append(_redact(failure, headers))
      if attempt < policy.max_attempts:
        await asyncio.sleep(policy.delay(attempt, retry_after, rng))
  raise ToolError(f"gave up on {url} after {policy.max_attempts} attempts; last: {failures[-1]}",
                  metadata={"attempts": policy.max_attempts, "failures": failures})
