"""Parses an assistant message of the Qwen3 protocol: reasoning, free text and tool calls.

The parser never raises: every problem becomes a `ToolCallError` with a kind, a message and the
raw text, so the episode loop can show it to the policy as an observation and count it.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from typing import Any, Mapping, Sequence

from toolorch_jax.tokenizer.chat_template import (THINK_CLOSE, THINK_OPEN, TOOL_CALL_CLOSE,
                                                  TOOL_CALL_OPEN)
from toolorch_jax.tools.base import ToolCall

_TAG = re.compile(re.escape(TOOL_CALL_OPEN) + "|" + re.escape(TOOL_CALL_CLOSE))


class ParseError(enum.StrEnum):
  """What was wrong with an assistant message; the episode loop counts faults by these names."""

  UNCLOSED_THINK = "unclosed_think"
  UNCLOSED_TAG = "unclosed_tag"
  UNEXPECTED_CLOSE = "unexpected_close"
  MALFORMED_JSON = "malformed_json"
  NOT_OBJECT = "not_object"
  MISSING_NAME = "missing_name"
  MALFORMED_ARGUMENTS = "malformed_arguments"
  NON_OBJECT_ARGUMENTS = "non_object_arguments"
  UNKNOWN_TOOL = "unknown_tool"


@dataclasses.dataclass
class ToolCallError:
  kind: ParseError
  message: str
  raw: str


@dataclasses.dataclass
class ParsedAssistant:
  content: str  # text outside <think> and <tool_call> blocks, stripped
  reasoning: str | None  # the <think> text, None when there is no think block
  tool_calls: list[ToolCall]
  errors: list[ToolCallError]


def tool_names(tools: Sequence[Mapping[str, Any]]) -> set[str]:
  """Names from OpenAI-style (`{"type": "function", "function": {...}}`) or flat schemas."""
  names = set()
  for tool in tools:
    function = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
    if isinstance(function.get("name"), str):
      names.add(function["name"])
  return names


def _parse_call(raw: str, known: set[str] | None) -> ToolCall | ToolCallError:
  body = raw.strip()
  try:
    call = json.loads(body)
  except (json.JSONDecodeError, RecursionError) as err:
    return ToolCallError(ParseError.MALFORMED_JSON, f"tool call is not valid JSON: {err}", raw)
  if not isinstance(call, dict):
    return ToolCallError(ParseError.NOT_OBJECT,
                         f"tool call is a JSON {type(call).__name__}, not an object", raw)
  name = call.get("name")
  if not isinstance(name, str) or not name:
    return ToolCallError(ParseError.MISSING_NAME, "tool call has no \"name\" string", raw)
  arguments = call.get("arguments", {})
  if isinstance(arguments, str):
    try:
      arguments = json.loads(arguments)
    except (json.JSONDecodeError, RecursionError) as err:
      return ToolCallError(ParseError.MALFORMED_ARGUMENTS, f"\"arguments\" of {name} is a string"
                           f" that is not valid JSON: {err}", raw)
  if not isinstance(arguments, dict):
    return ToolCallError(ParseError.NON_OBJECT_ARGUMENTS, f"\"arguments\" of {name} is a"
                         f" {type(arguments).__name__}, not an object", raw)
  if known is not None and name not in known:
    return ToolCallError(ParseError.UNKNOWN_TOOL,
                         f"unknown tool {name!r}; available: {sorted(known)}", raw)
  return ToolCall(name, arguments)


def _split_think(text: str) -> tuple[str | None, str, list[ToolCallError]]:
  if THINK_CLOSE in text:
    head, _, rest = text.partition(THINK_CLOSE)
    return head.split(THINK_OPEN)[-1].strip("\n"), rest, []
  if THINK_OPEN in text:
    head, _, rest = text.partition(THINK_OPEN)
    error = ToolCallError(ParseError.UNCLOSED_THINK, "<think> is never closed", rest)
    return rest.strip("\n"), head, [error]
  return None, text, []


def parse_assistant(text: str, tools: Sequence[Mapping[str, Any]] | None = None) -> ParsedAssistant:
  """Splits an assistant message into reasoning, content and tool calls; never raises."""
  if not isinstance(text, str):
    error = ToolCallError(ParseError.MALFORMED_JSON, f"assistant output is a {type(text).__name__}",
                          repr(text))
    return ParsedAssistant("", None, [], [error])
  known = tool_names(tools) if tools is not None else None
  reasoning, rest, errors = _split_think(text)
  calls: list[ToolCall] = []
  outside: list[str] = []
  position = 0
  open_at: int | None = None
  for tag in _TAG.finditer(rest):
    if tag.group() == TOOL_CALL_OPEN:
      if open_at is None:
        outside.append(rest[position:tag.start()])
      else:  # a second <tool_call> before the first is closed
        errors.append(ToolCallError(ParseError.UNCLOSED_TAG,
                                    "<tool_call> is not closed before the next one",
                                    rest[open_at:tag.start()]))
      open_at = tag.end()
    elif open_at is None:
      outside.append(rest[position:tag.start()])
      errors.append(ToolCallError(ParseError.UNEXPECTED_CLOSE,
                                  "</tool_call> without an opening <tool_call>",
                                  rest[max(0, tag.start() - 80):tag.end()]))
    else:
      result = _parse_call(rest[open_at:tag.start()], known)
      (calls if isinstance(result, ToolCall) else errors).append(result)
      open_at = None
    position = tag.end()
  if open_at is not None:
    errors.append(ToolCallError(ParseError.UNCLOSED_TAG, "<tool_call> is never closed", rest[open_at:]))
  else:
    outside.append(rest[position:])
  return ParsedAssistant("".join(outside).strip(), reasoning, calls, errors)
