"""The `Tokenizer` protocol every backend implements, and the chat protocol's special tokens."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
# Turn delimiters: what `decode(..., skip_special_tokens=True)` drops (Qwen3 flags these special).
CONTROL_TOKENS = (ENDOFTEXT, IM_START, IM_END)
# Qwen3's chat and tool protocol tokens; every backend must encode each as exactly one id.
CHAT_TOKENS = CONTROL_TOKENS + ("<think>", "</think>", "<tool_call>", "</tool_call>",
                                "<tool_response>", "</tool_response>")


@runtime_checkable
class Tokenizer(Protocol):
  """Text <-> ids. `encode` recognises special tokens written in the text and adds none of its own."""

  @property
  def vocab_size(self) -> int: ...

  @property
  def eos_id(self) -> int:
    """End of an assistant turn (`<|im_end|>`): where generation stops."""

  @property
  def pad_id(self) -> int:
    """Padding (`<|endoftext|>`), never attended to."""

  @property
  def stop_ids(self) -> tuple[int, ...]:
    """Every id that ends generation."""

  def special_ids(self) -> dict[str, int]:
    """Chat protocol token -> id."""

  def token_to_id(self, token: str) -> int | None: ...

  def encode(self, text: str) -> list[int]: ...

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str: ...
