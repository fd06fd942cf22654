"""Qwen3's chat template in plain Python, byte-identical to the official Jinja template.

The official template (`chat_template.jinja` of Qwen3 checkpoints) is the reference: the tests
render many conversations with jinja2 exactly as transformers does and compare bytes. Rendering in
Python instead of Jinja keeps the protocol readable, lets the episode loop render single turns
(append-only), and turns malformed messages into errors that name the message.

Deliberate differences, for input the official template cannot render or renders silently wrong:
an unknown role or a message that is not a dict raises `ValueError` naming the message (Jinja drops
or crashes), and a `None` system content renders as empty (Jinja raises on `None + str`).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
EMPTY_THINK = "<think>\n\n</think>\n\n"

_TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments"
    " within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>" + IM_END + "\n")
ROLES = ("system", "user", "assistant", "tool")


def tojson(value: Any) -> str:
  """transformers' `tojson` filter: no ASCII escaping, default separators, keys in given order."""
  return json.dumps(value, ensure_ascii=False)


def _text(message: Mapping[str, Any]) -> str:
  content = message.get("content")
  return content if isinstance(content, str) else ""


def _is_tool_response_wrapper(content: str) -> bool:
  return content.startswith(TOOL_RESPONSE_OPEN) and content.endswith(TOOL_RESPONSE_CLOSE)


def last_query_index(messages: Sequence[Mapping[str, Any]]) -> int:
  """Index of the last real user query; assistant turns after it keep their reasoning."""
  for index in range(len(messages) - 1, -1, -1):
    message = messages[index]
    content = message.get("content")
    if (message.get("role") == "user" and isinstance(content, str)
        and not _is_tool_response_wrapper(content)):
      return index
  return len(messages) - 1


def render_system(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping] | None) -> str:
  """The opening system turn: the first system message and, when given, the tool signatures."""
  first_is_system = bool(messages) and messages[0].get("role") == "system"
  system = (messages[0].get("content") or "") if first_is_system else ""
  if tools:
    head = IM_START + "system\n" + (system + "\n\n" if first_is_system else "")
    return head + _TOOLS_HEADER + "".join("\n" + tojson(t) for t in tools) + _TOOLS_FOOTER
  return IM_START + "system\n" + system + IM_END + "\n" if first_is_system else ""


def split_reasoning(message: Mapping[str, Any]) -> tuple[str, str]:
  """(reasoning, content) of an assistant message: `reasoning_content`, else a `<think>` block."""
  content = _text(message)
  reasoning = message.get("reasoning_content")
  if isinstance(reasoning, str):
    return reasoning, content
  if THINK_CLOSE in content:
    reasoning = content.split(THINK_CLOSE)[0].rstrip("\n").split(THINK_OPEN)[-1].lstrip("\n")
    return reasoning, content.split(THINK_CLOSE)[-1].lstrip("\n")
  return "", content


def render_tool_call(call: Mapping[str, Any]) -> str:
  function = call.get("function") or call
  arguments = function.get("arguments")
  arguments = arguments if isinstance(arguments, str) else tojson(arguments)
  return f'{TOOL_CALL_OPEN}\n{{"name": "{function.get("name")}", "arguments": {arguments}}}\n{TOOL_CALL_CLOSE}'


def render_assistant_body(message: Mapping[str, Any], with_think: bool) -> str:
  """What follows `<|im_start|>assistant\\n` up to and including `<|im_end|>`."""
  reasoning, content = split_reasoning(message)
  if with_think:
    body = THINK_OPEN + "\n" + reasoning.strip("\n") + "\n" + THINK_CLOSE + "\n\n" + content.lstrip("\n")
  else:
    body = content
  for i, call in enumerate(message.get("tool_calls") or ()):
    if i or content:
      body += "\n"
    body += render_tool_call(call)
  return body + IM_END


def render_tool_responses(contents: Sequence[str]) -> str:
  """Consecutive tool results, grouped into one user turn."""
  inner = "".join(f"\n{TOOL_RESPONSE_OPEN}\n{c}\n{TOOL_RESPONSE_CLOSE}" for c in contents)
  return IM_START + "user" + inner + IM_END + "\n"


def generation_prompt(enable_thinking: bool = True) -> str:
  return IM_START + "assistant\n" + ("" if enable_thinking else EMPTY_THINK)


def _check(messages: Sequence[Any]) -> None:
  for index, message in enumerate(messages):
    if not isinstance(message, Mapping):
      raise ValueError(f"messages[{index}] is a {type(message).__name__}, expected a dict")
    if message.get("role") not in ROLES:
      raise ValueError(f"messages[{index}] has role {message.get('role')!r}; expected one of {ROLES}")


def render_chat(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping] | None = None,
                add_generation_prompt: bool = False, enable_thinking: bool = True) -> str:
  """Renders OpenAI-style messages exactly as Qwen3's official chat template does."""
  _check(messages)
  parts = [render_system(messages, tools)]
  query = last_query_index(messages)
  last = len(messages) - 1
  index = 0
  while index <= last:
    message = messages[index]
    role = message["role"]
    if role == "user" or (role == "system" and index > 0):
      parts.append(IM_START + role + "\n" + _text(message) + IM_END + "\n")
    elif role == "assistant":
      reasoning, _ = split_reasoning(message)
      with_think = index > query and (index == last or bool(reasoning))
      parts.append(IM_START + "assistant\n" + render_assistant_body(message, with_think) + "\n")
    elif role == "tool":
      group = []
      while index <= last and messages[index]["role"] == "tool":
        group.append(_text(messages[index]))
        index += 1
      parts.append(render_tool_responses(group))
      continue
    index += 1
  if add_generation_prompt:
    parts.append(generation_prompt(enable_thinking))
  return "".join(parts)
