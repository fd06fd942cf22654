"""OpenAI-compatible HTTP server (Starlette) over the in-process JetStream client.

`POST /v1/chat/completions` renders the messages with Qwen3's chat template, generates, and parses
the answer with the project's tool-call parser: `tools` in, `tool_calls` out, with `usage` token
counts. Streaming sends content (and `reasoning_content`) deltas as tokens arrive and the parsed
tool calls in the final chunk. `stop` strings are applied here (JetStream has none). Every bad
request gets a 400 in OpenAI's error format naming the field.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from toolorch_jax.serving import jetstream_compat as js
from toolorch_jax.serving.client import EngineClient, RequestError
from toolorch_jax.serving.sampling import SamplingParams
from toolorch_jax.tokenizer import Tokenizer, parse_assistant, render_chat
from toolorch_jax.tokenizer.chat_template import THINK_CLOSE, THINK_OPEN, TOOL_CALL_OPEN

DEFAULT_MAX_TOKENS = 256


class BadRequest(ValueError):
  def __init__(self, message: str, param: str | None = None):
    super().__init__(message)
    self.param = param


def error_response(message: str, param: str | None = None, status: int = 400) -> JSONResponse:
  return JSONResponse({"error": {"message": message, "type": "invalid_request_error",
                                 "param": param, "code": None}}, status_code=status)


def _number(body: dict, name: str, kind: type, default: Any) -> Any:
  value = body.get(name, default)
  if value is None:
    return default
  if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
    raise BadRequest(f"'{name}' must be a{'n integer' if kind is int else ' number'}, got {value!r}", name)
  return kind(value)


def parse_request(body: Any) -> dict:
  """Validates a chat completion request; returns the fields the server uses."""
  if not isinstance(body, dict):
    raise BadRequest("the request body must be a JSON object")
  messages = body.get("messages")
  if not isinstance(messages, list) or not messages:
    raise BadRequest("'messages' must be a non-empty list", "messages")
  tools = body.get("tools")
  if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
    raise BadRequest("'tools' must be a list of objects", "tools")
  if _number(body, "n", int, 1) != 1:
    raise BadRequest("only n=1 is supported", "n")
  stop = body.get("stop") or []
  stop = [stop] if isinstance(stop, str) else stop
  if not (isinstance(stop, list) and all(isinstance(s, str) and s for s in stop)):
    raise BadRequest("'stop' must be a string or a list of non-empty strings", "stop")
  max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
  max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else _number({"max_tokens": max_tokens},
                                                                     "max_tokens", int, None)
  if max_tokens <= 0:
    raise BadRequest(f"'max_tokens' must be positive, got {max_tokens}", "max_tokens")
  kwargs = body.get("chat_template_kwargs") or {}
  sampling = SamplingParams(temperature=_number(body, "temperature", float, 1.0),
                            top_k=_number(body, "top_k", int, 0), top_p=_number(body, "top_p", float, 1.0),
                            seed=_number(body, "seed", int, None))
  try:
    sampling.validate()
  except ValueError as err:
    raise BadRequest(str(err), str(err).split(" ")[0]) from None
  return dict(messages=messages, tools=tools, stop=stop, max_tokens=max_tokens, sampling=sampling,
              stream=bool(body.get("stream", False)),
              enable_thinking=bool(kwargs.get("enable_thinking", True)))


def streamable(text: str) -> tuple[str, str]:
  """(reasoning, content) that is safe to show while `text` may still grow: nothing from a tool
  call on, and never a suffix that could be the start of a tag."""
  for tag in (THINK_OPEN, THINK_CLOSE, TOOL_CALL_OPEN):
    for k in range(len(tag) - 1, 0, -1):
      if text.endswith(tag[:k]):
        text = text[:-k]
        break
  text = text.split(TOOL_CALL_OPEN)[0]
  if THINK_OPEN not in text:
    return "", text.lstrip()
  before, _, rest = text.partition(THINK_OPEN)
  reasoning, closed, after = rest.partition(THINK_CLOSE)
  return reasoning.lstrip("\n"), (before + after if closed else before).lstrip()


def _truncate_at_stop(text: str, stop: list[str]) -> tuple[str, bool]:
  cuts = [text.index(s) for s in stop if s in text]
  return (text[:min(cuts)], True) if cuts else (text, False)


def assistant_message(text: str, tools) -> tuple[dict, bool]:
  parsed = parse_assistant(text, tools)
  calls = [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
           for c in parsed.tool_calls]
  message = {"role": "assistant", "content": parsed.content or (None if calls else ""),
             "reasoning_content": parsed.reasoning}
  if calls:
    message["tool_calls"] = calls
  return message, bool(calls)


class ChatServer:
  def __init__(self, client: EngineClient, tokenizer: Tokenizer, model_name: str):
    self.client = client
    self.tokenizer = tokenizer
    self.model_name = model_name
    self.app = Starlette(routes=[
        Route("/health", self.health, methods=["GET"]),
        Route("/v1/models", self.models, methods=["GET"]),
        Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
    ])

  async def health(self, request: Request) -> JSONResponse:
    failures = len(js.thread_failures)
    return JSONResponse({"status": "ok" if not failures else "degraded",
                         "policy_version": self.client.engine.version, "thread_failures": failures},
                        status_code=200 if not failures else 503)

  async def models(self, request: Request) -> JSONResponse:
    return JSONResponse({"object": "list", "data": [
        {"id": self.model_name, "object": "model", "created": 0, "owned_by": "toolorch"}]})

  async def chat_completions(self, request: Request):
    try:
      body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
      return error_response(f"the request body is not valid JSON: {err}")
    try:
      req = parse_request(body)
      try:
        prompt = render_chat(req["messages"], req["tools"], add_generation_prompt=True,
                             enable_thinking=req["enable_thinking"])
      except (ValueError, TypeError, AttributeError) as err:
        raise BadRequest(f"cannot render 'messages': {err}", "messages") from None
      ids = self.tokenizer.encode(prompt)
      try:
        self.client.check(ids, req["max_tokens"], req["sampling"])
      except RequestError as err:
        raise BadRequest(str(err), "max_tokens" if "max_tokens" in str(err) else "messages") from None
    except BadRequest as err:
      return error_response(str(err), err.param)
    meta = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": self.model_name}
    if req["stream"]:
      return StreamingResponse(self._stream(ids, req, meta), media_type="text/event-stream")
    return await self._complete(ids, req, meta)

  async def _generate(self, ids, req):
    """Yields (text so far, finished, finish_reason, error, token count, versions)."""
    tokens, versions = [], set()
    async with contextlib.aclosing(self.client.stream(ids, req["max_tokens"], req["sampling"])) as samples:
      async for sample in samples:
        tokens += sample.token_ids
        versions.update(sample.versions)
        text, stopped = _truncate_at_stop(self.tokenizer.decode(tokens, skip_special_tokens=True),
                                          req["stop"])
        if stopped:  # closing the stream cancels the request and frees its slot
          yield text, True, "stop", None, len(tokens), versions
          return
        reason = sample.finish_reason
        yield text, reason is not None, reason, sample.error, len(tokens), versions

  def _usage(self, ids, count) -> dict:
    return {"prompt_tokens": len(ids), "completion_tokens": count, "total_tokens": len(ids) + count}

  async def _complete(self, ids, req, meta) -> JSONResponse:
    text, reason, error, count, versions = "", None, None, 0, set()
    async with contextlib.aclosing(self._generate(ids, req)) as steps:
      async for text, _, reason, error, count, versions in steps:
        pass
    if reason == "error":
      return error_response(f"generation failed: {error}", status=500)
    message, has_calls = assistant_message(text, req["tools"])
    return JSONResponse({**meta, "object": "chat.completion", "choices": [{
        "index": 0, "message": message, "logprobs": None,
        "finish_reason": "tool_calls" if has_calls and reason == "stop" else reason}],
        "usage": self._usage(ids, count), "policy_versions": sorted(versions)})

  async def _stream(self, ids, req, meta):
    def chunk(delta: dict, finish_reason=None, **extra) -> str:
      payload = {**meta, "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": delta, "logprobs": None,
                              "finish_reason": finish_reason}], **extra}
      return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    shown = {"reasoning_content": "", "content": ""}
    async with contextlib.aclosing(self._generate(ids, req)) as steps:
      async for text, finished, reason, error, count, versions in steps:
        if reason == "error":
          yield f"data: {json.dumps({'error': {'message': f'generation failed: {error}'}})}\n\n"
          break
        if finished:
          message, has_calls = assistant_message(text, req["tools"])
          visible = {"reasoning_content": message["reasoning_content"] or "",
                     "content": message["content"] or ""}
        else:
          reasoning, content = streamable(text)
          visible = {"reasoning_content": reasoning, "content": content}
        delta = {}
        for field, value in visible.items():
          if value.startswith(shown[field]) and len(value) > len(shown[field]):
            delta[field] = value[len(shown[field]):]
            shown[field] = value
        if finished:
          if has_calls:
            delta["tool_calls"] = [dict(call, index=i) for i, call in enumerate(message["tool_calls"])]
          yield chunk(delta, "tool_calls" if has_calls and reason == "stop" else reason,
                      usage=self._usage(ids, count), policy_versions=sorted(versions))
        elif delta:
          yield chunk(delta)
    yield "data: [DONE]\n\n"
