"""An episode's transcript: the append-only token ids the policy saw and produced, never
re-tokenised.

An episode starts from the rendered prompt; the policy's generated ids are appended exactly as
sampled (loss mask 1); tool responses and the next generation prompt are rendered as a suffix and
appended (loss mask 0). Every turn boundary is a special token (`<|im_end|>`, `<|im_start|>`), which
the tokenizers split on before anything else, so within one user query followed by a chain of
assistant/tool turns the ids equal the tokenisation of the fully rendered conversation.

Where the official template rewrites history, the episode keeps what the policy actually saw:
- a new user message makes the template drop the `<think>` blocks of earlier assistant turns;
- an assistant turn with empty reasoning that is not the last turn is re-rendered without the
  (empty) `<think>` block it was generated after, e.g. with `enable_thinking=False`.
Training on a re-render would teach the policy from contexts it never saw, so the record stays as
generated; a server answering a fresh request renders it with the official template as usual.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from toolorch_jax.tokenizer.base import Tokenizer
from toolorch_jax.tokenizer.chat_template import (IM_END, IM_START, generation_prompt,
                                                  render_assistant_body, render_chat,
                                                  render_tool_responses)


@dataclasses.dataclass
class Transcript:
  tokenizer: Tokenizer
  enable_thinking: bool = True
  ids: list[int] = dataclasses.field(default_factory=list)
  loss_mask: list[int] = dataclasses.field(default_factory=list)  # 1 on policy-generated ids only

  @classmethod
  def start(cls, tokenizer: Tokenizer, messages: Sequence[Mapping[str, Any]],
            tools: Sequence[Mapping] | None = None, enable_thinking: bool = True) -> "Transcript":
    """The prompt: rendered messages plus the assistant generation prompt."""
    transcript = cls(tokenizer, enable_thinking)
    text = render_chat(messages, tools, add_generation_prompt=True, enable_thinking=enable_thinking)
    transcript._append(tokenizer.encode(text), policy=False)
    return transcript

  def _append(self, ids: Sequence[int], policy: bool) -> None:
    self.ids.extend(int(i) for i in ids)
    self.loss_mask.extend([int(policy)] * len(ids))

  @property
  def turn_closed(self) -> bool:
    return bool(self.ids) and self.ids[-1] == self.tokenizer.eos_id

  def append_generated(self, ids: Sequence[int]) -> None:
    """Ids sampled by the policy for one assistant turn, normally ending with `<|im_end|>`."""
    self._append(ids, policy=True)

  def append_assistant(self, message: Mapping[str, Any]) -> None:
    """An assistant message as the policy would have generated it (demonstrations, tests)."""
    body = render_assistant_body(message, with_think=self.enable_thinking)
    self.append_generated(self.tokenizer.encode(body))

  def _append_turn(self, turn: str) -> None:
    if not self.turn_closed:
      raise ValueError("the assistant turn is not closed with <|im_end|> (generation was cut off);"
                       " the transcript cannot continue")
    self._append(self.tokenizer.encode("\n" + turn + generation_prompt(self.enable_thinking)),
                 policy=False)

  def append_tool_responses(self, contents: Sequence[str]) -> None:
    """Results of the last turn's tool calls (one user turn) and the next generation prompt."""
    self._append_turn(render_tool_responses(list(contents)))

  def append_user(self, content: str) -> None:
    """A follow-up user message and the next generation prompt."""
    self._append_turn(IM_START + "user\n" + content + IM_END + "\n")
