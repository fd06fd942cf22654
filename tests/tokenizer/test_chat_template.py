"""Byte-for-byte equality with Qwen3's official Jinja chat template, rendered as transformers does."""

import pytest

transformers = pytest.importorskip("transformers")

from toolorch_jax.datadir import data_path  # noqa: E402
from toolorch_jax.tokenizer import render_chat  # noqa: E402

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city (°C).",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web; returns <b>snippets</b> & links.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                    "k": {"type": "integer", "default": 3}}}}}
ANSWER = {"type": "function", "function": {"name": "answer", "parameters": {
    "type": "object", "properties": {"model": {"type": "string", "enum": ["answer-1", "answer-2"]}}}}}
PLAIN_TOOL = {"name": "python", "description": "Run code", "parameters": {"type": "object"}}

SYS = {"role": "system", "content": "You are a careful orchestrator."}
U1 = {"role": "user", "content": "What's the weather in Paris?"}
U2 = {"role": "user", "content": "And in 東京? 🌧️"}


def call(name, args, as_string=False, nested=True):
  import json
  arguments = json.dumps(args, ensure_ascii=False) if as_string else args
  body = {"name": name, "arguments": arguments}
  return {"id": f"call_{name}", "type": "function", "function": body} if nested else body


def asst(content="", reasoning=None, calls=None):
  message = {"role": "assistant", "content": content}
  if reasoning is not None:
    message["reasoning_content"] = reasoning
  if calls:
    message["tool_calls"] = calls
  return message


def tool(content, call_id="call_x"):
  return {"role": "tool", "content": content, "tool_call_id": call_id}


W = call("get_weather", {"city": "Paris"})
CASES = {
    "user_only": ([U1], None),
    "system_user": ([SYS, U1], None),
    "system_user_tools": ([SYS, U1], [WEATHER, SEARCH]),
    "user_tools_no_system": ([U1], [WEATHER]),
    "plain_tool_schema": ([U1], [PLAIN_TOOL]),
    "assistant_plain": ([U1, asst("It is sunny.")], None),
    "assistant_reasoning_last": ([U1, asst("Sunny.", reasoning="Check the forecast.")], None),
    "assistant_empty_reasoning_last": ([U1, asst("Sunny.", reasoning="")], None),
    "assistant_inline_think": ([U1, asst("<think>\nhmm\n</think>\n\nSunny.")], None),
    "assistant_inline_think_no_newlines": ([U1, asst("<think>hmm</think>Sunny.")], None),
    "one_tool_call": ([SYS, U1, asst("", "Need data.", [W])], [WEATHER]),
    "tool_call_with_content": ([U1, asst("Let me check.", "r", [W])], [WEATHER]),
    "string_arguments": ([U1, asst("", "r", [call("get_weather", {"city": "Zürich"}, True)])], [WEATHER]),
    "flat_tool_call": ([U1, asst("", "r", [call("get_weather", {"city": "Oslo"}, nested=False)])], [WEATHER]),
    "several_calls_one_turn": ([U1, asst("", "two cities", [W, call("get_weather", {"city": "Rome"}),
                                                           call("search", {"query": "rain", "k": 2})])],
                               [WEATHER, SEARCH]),
    "tool_response": ([U1, asst("", "r", [W]), tool("18°C, clear")], [WEATHER]),
    "consecutive_tool_responses": ([U1, asst("", "r", [W, W]), tool("18°C"), tool("19°C")], [WEATHER]),
    "tool_response_with_tags_unicode": (
        [U1, asst("", "r", [W]), tool("<b>bold</b> <tool_call>x</tool_call> ünïcødé 🚀 \\n")], [WEATHER]),
    "tool_response_empty": ([U1, asst("", "r", [W]), tool("")], [WEATHER]),
    "chain_final_answer": ([SYS, U1, asst("", "r1", [W]), tool("18°C"),
                            asst("It's 18°C.", "r2")], [WEATHER]),
    "chain_intermediate_no_reasoning": ([U1, asst("", None, [W]), tool("18°C"),
                                         asst("Done.", "final")], [WEATHER]),
    "chain_three_steps": ([U1, asst("", "a", [W]), tool("1"), asst("", "b", [call("search", {"query": "q"})]),
                           tool("2"), asst("ok", "c")], [WEATHER, SEARCH]),
    "multi_turn_drops_old_reasoning": ([U1, asst("Sunny.", "old thoughts"), U2,
                                        asst("Rainy.", "new thoughts")], None),
    "multi_turn_with_tools": ([SYS, U1, asst("", "a", [W]), tool("18"), asst("18.", "b"), U2,
                               asst("", "c", [call("get_weather", {"city": "東京"})]), tool("22")],
                              [WEATHER]),
    "user_message_wrapping_tool_response": (
        [U1, asst("", "a", [W]), {"role": "user", "content": "<tool_response>\n18\n</tool_response>"},
         asst("ok", "b")], [WEATHER]),
    "empty_user_content": ([{"role": "user", "content": ""}], None),
    "none_assistant_content_with_calls": ([U1, {"role": "assistant", "content": None, "tool_calls": [W]}],
                                          [WEATHER]),
    "list_user_content": ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}, U1], None),
    "second_system_message": ([SYS, U1, {"role": "system", "content": "Be brief."}, U2], None),
    "tool_first_message": ([tool("orphan result"), U1], None),
    "nested_arguments": ([U1, asst("", "r", [call("search", {"query": "a\"b", "filters": {"year": [2024, 2025]},
                                                             "exact": True, "none": None})])], [SEARCH]),
    "answer_alias_tool": ([SYS, U1, asst("", "cheap first", [call("answer", {"model": "answer-2"})]),
                           tool("Paris: 18°C")], [ANSWER, WEATHER, SEARCH]),
    "whitespace_content": ([U1, asst("\n\n  spaced  \n", "\nthought\n")], None),
}
FLAGS = [(False, True), (True, True), (True, False), (False, False)]


@pytest.fixture(scope="module")
def reference_tokenizer():
  return transformers.AutoTokenizer.from_pretrained(str(data_path("qwen3")))


def test_reference_uses_the_official_template_file(reference_tokenizer):
  assert reference_tokenizer.chat_template == data_path("qwen3/chat_template.jinja").read_text()


@pytest.mark.parametrize("add_generation_prompt,enable_thinking", FLAGS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_render_matches_official_template(reference_tokenizer, case, add_generation_prompt,
                                          enable_thinking):
  messages, tools = CASES[case]
  expected = reference_tokenizer.apply_chat_template(
      messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt,
      enable_thinking=enable_thinking)
  assert render_chat(messages, tools, add_generation_prompt, enable_thinking) == expected


def test_bad_messages_name_the_message():
  with pytest.raises(ValueError, match=r"messages\[1\] has role 'robot'"):
    render_chat([U1, {"role": "robot", "content": "x"}])
  with pytest.raises(ValueError, match=r"messages\[0\] is a str"):
    render_chat(["hello"])
