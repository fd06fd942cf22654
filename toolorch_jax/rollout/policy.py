"""Policies the episode loop can run: the in-process engine, an OpenAI endpoint, or a script.

`act` gets the episode's token ids so far (what a token-level policy continues), the same
conversation as messages (what an endpoint policy needs) and the tool schemas, and returns the
assistant turn as token ids, ending with `<|im_end|>` when the turn was finished.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from typing import Any, Callable, Protocol, Sequence

import httpx

from toolorch_jax.rollout.trajectory import TurnEnd
from toolorch_jax.tokenizer import Tokenizer
from toolorch_jax.tokenizer.chat_template import render_assistant_body


@dataclasses.dataclass
class PolicyTurn:
  token_ids: list[int]
  logprobs: list[float]  # per token; zeros when the policy does not report them
  versions: list[int]  # per token
  finish_reason: TurnEnd
  error: str | None = None


class Policy(Protocol):
  async def act(self, prompt_ids: Sequence[int], messages: list[dict[str, Any]],
                tools: list[dict[str, Any]], max_tokens: int, episode_id: str = "") -> PolicyTurn: ...


class EnginePolicy:
  """The in-process JetStream engine (rollouts for RL): log-probs and policy versions included.

  Each turn samples with a seed derived from (`seed`, episode id, turn position), so a group's
  episodes differ from one another and a rerun (or a resumed run) samples the same tokens.
  """

  def __init__(self, client, sampling=None, seed: int = 0):
    self.client = client
    self.sampling = sampling
    self.seed = seed

  async def act(self, prompt_ids, messages, tools, max_tokens, episode_id="") -> PolicyTurn:
    sampling = self.sampling
    if sampling is not None and sampling.seed is None and episode_id:
      key = f"{self.seed}/{episode_id}/{len(prompt_ids)}".encode()
      sampling = dataclasses.replace(sampling, seed=zlib.crc32(key))
    generation = await self.client.generate(list(prompt_ids), max_tokens, sampling)
    return PolicyTurn(generation.token_ids, generation.logprobs, generation.versions,
                      TurnEnd(generation.finish_reason or TurnEnd.ERROR), generation.error)


def encode_assistant(tokenizer: Tokenizer, message: dict[str, Any], enable_thinking: bool) -> list[int]:
  """Token ids of an assistant message as if the policy had generated it."""
  return tokenizer.encode(render_assistant_body(message, with_think=enable_thinking))


class ScriptedPolicy:
  """Answers from a script: `script(messages, tools)` returns the next assistant message.

  Used for gold replays and tests: its turns are known exactly.
  """

  def __init__(self, tokenizer: Tokenizer, script: Callable[[list, list], dict[str, Any]],
               enable_thinking: bool = True):
    self.tokenizer = tokenizer
    self.script = script
    self.enable_thinking = enable_thinking

  async def act(self, prompt_ids, messages, tools, max_tokens, episode_id="") -> PolicyTurn:
    ids = encode_assistant(self.tokenizer, self.script(messages, tools), self.enable_thinking)
    finish = TurnEnd.STOP
    if len(ids) > max_tokens:
      ids, finish = ids[:max_tokens], TurnEnd.LENGTH
    return PolicyTurn(ids, [0.0] * len(ids), [0] * len(ids), finish)


class EndpointPolicy:
  """An OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, NIM, `toolorch serve`, ...)."""

  def __init__(self, tokenizer: Tokenizer, base_url: str, model: str, api_key: str = "unused",
               temperature: float = 0.0, enable_thinking: bool = True, timeout_s: float = 300.0):
    self.tokenizer = tokenizer
    self.url = base_url.rstrip("/") + "/chat/completions"
    self.model = model
    self.headers = {"Authorization": f"Bearer {api_key}"}
    self.temperature = temperature
    self.enable_thinking = enable_thinking
    self.timeout_s = timeout_s

  async def act(self, prompt_ids, messages, tools, max_tokens, episode_id="") -> PolicyTurn:
    body = {"model": self.model, "messages": messages, "tools": tools or None,
            "max_tokens": max_tokens, "temperature": self.temperature,
            "chat_template_kwargs": {"enable_thinking": self.enable_thinking}}
    try:
      async with httpx.AsyncClient(timeout=self.timeout_s) as http:
        response = await http.post(self.url, json=body, headers=self.headers)
        response.raise_for_status()
        choice = response.json()["choices"][0]
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as err:
      return PolicyTurn([], [], [], TurnEnd.ERROR, f"policy endpoint failed: {err}")
    message = dict(choice["message"])
    for call in message.get("tool_calls") or ():
      arguments = call["function"].get("arguments")
      if isinstance(arguments, str):
        try:
          call["function"]["arguments"] = json.loads(arguments)
        except json.JSONDecodeError:
          pass  # left as the raw string: the parser reports it to the policy
    ids = encode_assistant(self.tokenizer, message, self.enable_thinking)
    stopped = choice.get("finish_reason") in ("stop", "tool_calls")
    if not stopped and ids and ids[-1] == self.tokenizer.eos_id:
      ids = ids[:-1]  # a cut-off turn has no <|im_end|>
    return PolicyTurn(ids, [0.0] * len(ids), [0] * len(ids),
                      TurnEnd.STOP if stopped else TurnEnd.LENGTH)
