"""The tool-call parser: structured calls, structured errors, never an exception."""

import pytest
from hypothesis import given, settings, strategies as st

from toolorch_jax.tokenizer import parse_assistant
from toolorch_jax.tools import ToolCall

TOOLS = [{"type": "function", "function": {"name": "search"}}, {"name": "python"}]


def test_valid_calls_reasoning_and_content():
  text = ('<think>\nplan it\n</think>\n\nLet me look.\n<tool_call>\n{"name": "search", "arguments": '
          '{"query": "東京"}}\n</tool_call>\n<tool_call>\n{"name": "python", "arguments": '
          '"{\\"code\\": \\"print(1)\\"}"}\n</tool_call>')
  parsed = parse_assistant(text, TOOLS)
  assert parsed.reasoning == "plan it"
  assert parsed.content == "Let me look."
  assert parsed.tool_calls == [("search", {"query": "東京"}), ("python", {"code": "print(1)"})]
  assert isinstance(parsed.tool_calls[0], ToolCall) and parsed.errors == []


def test_plain_answer_without_tags():
  parsed = parse_assistant("The answer is 42.")
  assert (parsed.content, parsed.reasoning, parsed.tool_calls, parsed.errors) == ("The answer is 42.", None, [], [])


def test_missing_arguments_means_no_arguments():
  assert parse_assistant('<tool_call>{"name": "search"}</tool_call>').tool_calls == [("search", {})]


MALFORMED = [
    ('<tool_call>\n{"name": "search", "arguments": {"query": }\n</tool_call>', "malformed_json",
     '\n{"name": "search", "arguments": {"query": }\n'),
    ("<tool_call>[1, 2]</tool_call>", "not_object", "[1, 2]"),
    ('<tool_call>"search"</tool_call>', "not_object", '"search"'),
    ('<tool_call>{"arguments": {}}</tool_call>', "missing_name", '{"arguments": {}}'),
    ('<tool_call>{"name": "", "arguments": {}}</tool_call>', "missing_name", '{"name": "", "arguments": {}}'),
    ('<tool_call>{"name": 7, "arguments": {}}</tool_call>', "missing_name", '{"name": 7, "arguments": {}}'),
    ('<tool_call>{"name": "search", "arguments": [1]}</tool_call>', "non_object_arguments",
     '{"name": "search", "arguments": [1]}'),
    ('<tool_call>{"name": "search", "arguments": "42"}</tool_call>', "non_object_arguments",
     '{"name": "search", "arguments": "42"}'),
    ('<tool_call>{"name": "search", "arguments": "{oops"}</tool_call>', "malformed_arguments",
     '{"name": "search", "arguments": "{oops"}'),
    ('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>', "unknown_tool",
     '{"name": "rm_rf", "arguments": {}}'),
    ('<tool_call>\n{"name": "search", "arguments": {}}', "unclosed_tag", '\n{"name": "search", "arguments": {}}'),
    ('text </tool_call> more', "unexpected_close", "text </tool_call>"),
    ("<think>\nnever closed", "unclosed_think", "\nnever closed"),
]


@pytest.mark.parametrize("text,kind,raw", MALFORMED)
def test_malformed_cases_give_their_errors(text, kind, raw):
  parsed = parse_assistant(text, TOOLS)
  assert [e.kind for e in parsed.errors] == [kind]
  assert parsed.errors[0].raw == raw
  assert parsed.errors[0].message
  assert parsed.tool_calls == []


def test_one_bad_call_does_not_hide_the_good_ones():
  text = ('<tool_call>{"name": "search", "arguments": {"query": "a"}}</tool_call>'
          "<tool_call>{broken</tool_call>"
          '<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>')
  parsed = parse_assistant(text, TOOLS)
  assert [c.name for c in parsed.tool_calls] == ["search", "python"]
  assert [e.kind for e in parsed.errors] == ["malformed_json"]


def test_nested_open_tag_reports_the_unclosed_one():
  parsed = parse_assistant('<tool_call>{"name": "a"<tool_call>{"name": "search", "arguments": {}}</tool_call>')
  assert [e.kind for e in parsed.errors] == ["unclosed_tag"]
  assert parsed.tool_calls == [("search", {})]


FRAGMENTS = st.sampled_from(["<tool_call>", "</tool_call>", "<think>", "</think>", "{", "}", '"name"',
                             '"arguments"', ":", ",", '"', "[", "]", "\n", "search", "null", "1e999"])


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(), st.lists(st.one_of(FRAGMENTS, st.text(max_size=5))).map("".join)),
       st.booleans())
def test_arbitrary_strings_never_raise(text, with_tools):
  parsed = parse_assistant(text, TOOLS if with_tools else None)
  assert isinstance(parsed.content, str)
  for error in parsed.errors:
    assert error.kind and isinstance(error.raw, str)


def test_deeply_nested_json_does_not_raise():
  parsed = parse_assistant("<tool_call>" + "[" * 100_000 + "</tool_call>")
  assert [e.kind for e in parsed.errors] == ["malformed_json"]


def test_non_string_input_does_not_raise():
  assert parse_assistant(None).errors[0].kind == "malformed_json"
