"""Reading what an expert wrote: the query, the code or the answer inside its reply.

Experts are asked to wrap their output (`<query>`, a ```python block, `<answer>`); math models
answer in `\\boxed{}` instead. Reasoning models may think aloud first, so `<think>` blocks are
dropped before anything is looked for, and the last occurrence wins, as the reply's conclusion.
"""

from __future__ import annotations

import re

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_CODE = re.compile(r"```python[^\n]*\n(.*?)```", re.DOTALL)
_BOXED = "\\boxed{"


def strip_think(text: str) -> str:
  return _THINK.sub("", text).strip()


def tagged(text: str, tag: str) -> str | None:
  """The text inside the last `<tag>...</tag>`, None when there is none."""
  found = re.findall(rf"<{tag}>(.*?)</{tag}>", strip_think(text), re.DOTALL)
  return found[-1].strip() if found else None


def python_code(text: str) -> str:
  """The last ```python block, "" when there is none."""
  found = _CODE.findall(strip_think(text))
  return found[-1].strip() if found else ""


def boxed(text: str) -> str | None:
  """The contents of the last `\\boxed{...}`, braces inside it kept balanced."""
  start = text.rfind(_BOXED)
  if start < 0:
    return None
  depth, begin = 1, start + len(_BOXED)
  for i in range(begin, len(text)):
    depth += {"{": 1, "}": -1}.get(text[i], 0)
    if depth == 0:
      return text[begin:i].strip()
  return None


def final_answer(text: str) -> str:
  """`<answer>` if present, else the last `\\boxed{}`, else the whole reply."""
  reply = strip_think(text)
  for found in (tagged(reply, "answer"), boxed(reply)):
    if found is not None:
      return found
  return reply
