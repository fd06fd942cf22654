"""The `llm_expert` tool: a chat completion from another model, paid by the token it reports.

Speaks OpenAI's `/v1/chat/completions`, so it reaches OpenAI, NIM, vLLM and `toolorch serve`
alike. The policy picks a model by alias; the catalog says where it is served and what it costs.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from toolorch_jax.config import ConfigError
from toolorch_jax.tools.base import Tool, ToolContext, ToolError, ToolResult
from toolorch_jax.tools.catalog import ModelSpec
from toolorch_jax.tools.http_retry import RetryPolicy, post_json
from toolorch_jax.tools.pricing import estimate_tokens


@dataclasses.dataclass
class LLMExpertSettings:
  """Which models the tool offers and how it asks them."""

  # Aliases or model keys the policy may pick from; the first is the default.
  models: list[str] = dataclasses.field(default_factory=list)
  system_prompt: str = ""
  temperature: float | None = None   # None: the server's default (reasoning models accept no other)
  # More request fields, e.g. max_completion_tokens, top_p, reasoning_effort.
  body: dict[str, Any] = dataclasses.field(default_factory=dict)
  retry: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)


def _choice(body: Any) -> tuple[dict[str, Any], dict | None, str | None]:
  """(message, usage, finish_reason) of a chat completion; ValueError if it is not one."""
  choice = body["choices"][0]
  message = choice["message"]
  content = message.get("content") or ""
  if not isinstance(content, str):
    raise ValueError(f"message content is {type(content).__name__}, not text")
  usage = body.get("usage")
  return {**message, "content": content}, usage if isinstance(usage, dict) else None, \
      choice.get("finish_reason")


@dataclasses.dataclass
class Completion:
  """One chat completion and its account: what the model said, what it cost."""

  message: dict[str, Any]  # the reply message: `content` (text), maybe `tool_calls`
  cost_usd: float
  metadata: dict[str, Any]  # model, tokens (estimated or reported), finish reason, attempts


async def complete(spec: ModelSpec, payload: dict[str, Any], retry: RetryPolicy) -> Completion:
  """POSTs a chat completion to `spec`'s endpoint (its API key, bounded retries) and prices it by
  the usage the server reports, or by a marked estimate when it reports none. ToolError when the
  endpoint fails, refuses, or never answers with a completion."""
  headers = {}
  if spec.api_key_env:
    key = os.environ.get(spec.api_key_env)
    if not key:
      raise ToolError(f"model '{spec.model}' needs an API key: set the environment variable"
                      f" {spec.api_key_env}")
    headers["Authorization"] = f"Bearer {key}"
  reply = await post_json(f"{spec.base_url.rstrip('/')}/chat/completions",
                          {"model": spec.model, **payload}, headers=headers, policy=retry,
                          parse=_choice)
  message, usage, finish = reply.value
  if usage and "prompt_tokens" in usage and "completion_tokens" in usage:
    tokens_in, tokens_out, estimated = usage["prompt_tokens"], usage["completion_tokens"], False
  else:  # a server that reports no usage is still billed, by a marked estimate
    prompt_text = "".join(str(m.get("content") or "") for m in payload.get("messages", ()))
    tokens_in, tokens_out = estimate_tokens(prompt_text), estimate_tokens(message["content"])
    estimated = True
  return Completion(message, spec.price.cost(input_tokens=tokens_in, output_tokens=tokens_out),
                    {"model": spec.model, "input_tokens": tokens_in, "output_tokens": tokens_out,
                     "tokens_estimated": estimated, "finish_reason": finish,
                     "attempts": reply.attempts, "failures": reply.failures})


class LLMExpert(Tool):
  """Asks a specialist or generalist model; `model` picks it by alias."""

  Settings = LLMExpertSettings
  description = "Ask another language model."

  def __init__(self, name: str, settings: LLMExpertSettings | None = None, **kwargs):
    super().__init__(name, settings, **kwargs)
    if not self.settings.models:
      raise ConfigError("settings.models: list at least one model or alias")
    for i, choice in enumerate(self.settings.models):
      if not self.models.resolve(choice, f"settings.models[{i}]").base_url:
        raise ConfigError(f"settings.models[{i}]: model '{choice}' has no base_url")
    self.description = f"{self.description}\n{self.models.price_table(self.settings.models)}"
    self.parameters = {"type": "object", "properties": {
        "model": {"type": "string", "enum": list(self.settings.models),
                  "description": f"which model to ask (default {self.settings.models[0]})"},
        "prompt": {"type": "string", "description": "the question or task, as one user message"},
        "messages": {"type": "array", "minItems": 1, "description": "a whole conversation instead",
                     "items": {"type": "object", "required": ["role", "content"], "properties": {
                         "role": {"enum": ["system", "user", "assistant"]},
                         "content": {"type": "string"}}}}},
        "additionalProperties": False}

  def _spec(self, arguments: dict[str, Any]) -> ModelSpec:
    return self.models.resolve(arguments.get("model", self.settings.models[0]))

  def backend_for(self, arguments: dict[str, Any]) -> str:
    return self._spec(arguments).backend

  def _messages(self, arguments: dict[str, Any]) -> list[dict[str, str]]:
    if ("prompt" in arguments) == ("messages" in arguments):
      raise ToolError(f"bad arguments for '{self.name}': give exactly one of 'prompt' and"
                      " 'messages'")
    messages = arguments.get("messages") or [{"role": "user", "content": arguments["prompt"]}]
    if self.settings.system_prompt:
      messages = [{"role": "system", "content": self.settings.system_prompt}, *messages]
    return messages

  async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    spec, messages = self._spec(arguments), self._messages(arguments)
    payload = {"messages": messages, **self.settings.body}
    if self.settings.temperature is not None:
      payload["temperature"] = self.settings.temperature
    about = {"model": spec.model, "alias": arguments.get("model", self.settings.models[0])}
    try:
      done = await complete(spec, payload, self.settings.retry)
    except ToolError as err:
      err.metadata |= about
      raise
    return ToolResult(text=done.message["content"], cost_usd=done.cost_usd,
                      metadata={**done.metadata, **about})
