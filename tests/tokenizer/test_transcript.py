"""Append-only transcripts: the ids grown turn by turn equal the tokenised full render."""

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from toolorch_jax.tokenizer import Transcript, render_chat

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
         for n in ("search", "python", "answer")]
# Text that exercises tokenizer boundaries: unicode, newlines, tags, JSON-ish punctuation.
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40) | st.sampled_from(
    ["", "\n", " 18°C ", "<b>x</b>", "東京 🚀", "{\"a\": [1, 2]}", "line1\nline2\n\n", "</think>"])
ARGS = st.dictionaries(st.sampled_from(["query", "code", "model", "k"]),
                       st.one_of(TEXT, st.integers(-5, 10**6), st.booleans(), st.none()), max_size=3)


@st.composite
def chains(draw):
  """A system prompt, one user query, then assistant turns each with reasoning and tool calls."""
  messages = [{"role": "system", "content": draw(TEXT)}, {"role": "user", "content": draw(TEXT)}]
  steps = []
  for _ in range(draw(st.integers(1, 3))):
    calls = [{"type": "function", "function": {"name": draw(st.sampled_from(["search", "python", "answer"])),
                                               "arguments": draw(ARGS)}}
             for _ in range(draw(st.integers(1, 3)))]
    assistant = {"role": "assistant", "content": draw(TEXT), "tool_calls": calls,
                 "reasoning_content": draw(st.text(min_size=1, max_size=30).filter(lambda s: s.strip("\n")))}
    steps.append((assistant, [draw(TEXT) for _ in calls]))
  return messages, steps


@pytest.mark.parametrize("backend", ["qwen_tokenizer", "sp_tokenizer"])
def test_incremental_ids_equal_full_render(request, backend):
  tokenizer = request.getfixturevalue(backend)

  @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
  @given(chains())
  def check(chain):
    messages, steps = chain
    transcript = Transcript.start(tokenizer, messages, TOOLS)
    history = list(messages)
    for assistant, results in steps:
      transcript.append_assistant(assistant)
      transcript.append_tool_responses(results)
      history += [assistant] + [{"role": "tool", "content": r} for r in results]
      expected = tokenizer.encode(render_chat(history, TOOLS, add_generation_prompt=True))
      assert transcript.ids == expected
    final = {"role": "assistant", "content": "done", "reasoning_content": "final"}
    transcript.append_assistant(final)
    full = tokenizer.encode(render_chat(history + [final], TOOLS))
    assert transcript.ids + tokenizer.encode("\n") == full
    policy = [i for i, m in zip(transcript.ids, transcript.loss_mask) if m]
    assert policy[-1] == tokenizer.eos_id and sum(transcript.loss_mask) < len(transcript.ids)

  check()


def test_loss_mask_marks_exactly_the_generated_ids(qwen_tokenizer):
  transcript = Transcript.start(qwen_tokenizer, [{"role": "user", "content": "hi"}], TOOLS)
  prompt = len(transcript.ids)
  generated = qwen_tokenizer.encode("<think>\nx\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|>")
  transcript.append_generated(generated)
  transcript.append_tool_responses(["r1", "r2"])
  assert transcript.loss_mask == [0] * prompt + [1] * len(generated) + [0] * (len(transcript.ids) - prompt - len(generated))
  assert transcript.ids[prompt:prompt + len(generated)] == generated  # kept verbatim, never re-tokenised


def test_cut_off_generation_cannot_continue(qwen_tokenizer):
  transcript = Transcript.start(qwen_tokenizer, [{"role": "user", "content": "hi"}])
  transcript.append_generated(qwen_tokenizer.encode("<think>\nstill thinking"))
  with pytest.raises(ValueError, match="not closed with <|im_end|>"):
    transcript.append_tool_responses(["x"])


def test_documented_divergences_from_a_re_render(qwen_tokenizer):
  """Where the template rewrites history, the transcript keeps what the policy saw."""
  user = {"role": "user", "content": "Q1"}
  step = {"role": "assistant", "content": "", "reasoning_content": "old thoughts",
          "tool_calls": [{"name": "search", "arguments": {"query": "q"}}]}
  transcript = Transcript.start(qwen_tokenizer, [user], TOOLS)
  transcript.append_assistant(step)
  transcript.append_user("Q2")
  rerender = render_chat([user, step, {"role": "user", "content": "Q2"}], TOOLS, add_generation_prompt=True)
  kept = qwen_tokenizer.decode(transcript.ids)
  assert "old thoughts" in kept and "old thoughts" not in rerender  # template drops earlier <think>

  # enable_thinking=False: turns were generated after an empty <think> block the re-render omits
  transcript = Transcript.start(qwen_tokenizer, [user], TOOLS, enable_thinking=False)
  plain = {"role": "assistant", "content": "", "tool_calls": step["tool_calls"]}
  transcript.append_assistant(plain)
  transcript.append_tool_responses(["r"])
  history = [user, plain, {"role": "tool", "content": "r"}]
  rerender = render_chat(history, TOOLS, add_generation_prompt=True, enable_thinking=False)
  assert qwen_tokenizer.decode(transcript.ids) == rerender.replace(
      "<|im_start|>assistant\n<tool_call>", "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>", 1)
