"""Qwen3 tokenizer ids equal transformers' Qwen2 tokenizer built from the same files."""

import json

import pytest

transformers = pytest.importorskip("transformers")

from toolorch_jax.datadir import data_path  # noqa: E402
from toolorch_jax.tokenizer import CHAT_TOKENS, load_tokenizer, render_chat  # noqa: E402

HANDWRITTEN = [
    "Hello, world! It's a test; we'll see. I'M LOUD and you're quiet.",
    "中文分词测试：今天天气很好。日本語のテキストも。한국어 문장입니다.",
    "Emoji: 😀😃🚀🇫🇷👩‍👩‍👧‍👦 and ✨combined✨ é vs é (NFC vs NFD)",
    "def fib(n):\n\tif n < 2:\n\t\treturn n\n\treturn fib(n - 1) + fib(n - 2)\n",
    "x = {'a': [1, 2, 3], \"b\": None}  # comment\r\nprint(x)",
    "Numbers: 1234567890 3.14159 -42 1e-6 0x1F 1,000,000 ²³",
    "whitespace     runs\t\t\ttabs\n\n\n\nnewlines    \n   trailing   ",
    "   leading spaces and a lone\u00a0non-breaking space\u2003em space",
    "special tokens inside text: <|im_start|>user\nhi<|im_end|><|endoftext|>",
    "<think>\nreasoning\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<tool_response>\nresult\n</tool_response><|fim_prefix|><|object_ref_start|>",
    "almost special: <|im_star|> <think > </ think> <tool_call",
    "",
    " ",
    "\n",
    "a" * 300,
    "Ünïcödé ÅÄÖ ßẞ ﬁ ligature Ⅻ ½ ℃ ™",
]


def corpus():
  texts = list(HANDWRITTEN)
  for path in ("frames/frames.jsonl", "gsm8k/test.jsonl"):
    with data_path(path).open(encoding="utf-8") as lines:
      for line in lines:
        texts.extend(v for v in json.loads(line).values() if isinstance(v, str))
  texts.append(data_path("tau2/domains/airline/policy.md").read_text(encoding="utf-8"))
  texts.append(data_path("toolorchestra/tools.json").read_text(encoding="utf-8"))
  texts.append(render_chat([{"role": "user", "content": "Q?"},
                            {"role": "assistant", "content": "A", "reasoning_content": "r"}],
                           tools=[{"name": "search"}], add_generation_prompt=True))
  return texts


@pytest.fixture(scope="module")
def reference():
  tokenizer = transformers.AutoTokenizer.from_pretrained(str(data_path("qwen3")))
  assert type(tokenizer).__name__ == "Qwen2Tokenizer"
  return tokenizer


@pytest.fixture(scope="module")
def ours():
  return load_tokenizer(data_path("qwen3"))


def test_ids_equal_transformers_on_a_varied_corpus(ours, reference):
  texts = corpus()
  total = 0
  for text in texts:
    expected = reference.encode(text, add_special_tokens=False)
    assert ours.encode(text) == expected, text[:80]
    assert ours.decode(expected) == reference.decode(expected)
    total += len(expected)
  print(f"TOKENIZER compared {len(texts)} texts, {total} tokens")
  assert total > 200_000


def test_special_ids_and_sizes(ours, reference):
  assert ours.vocab_size == len(reference) == 151669
  for token in CHAT_TOKENS:
    assert ours.special_ids()[token] == reference.convert_tokens_to_ids(token)
  assert (ours.eos_id, ours.pad_id) == (151645, 151643)
  assert ours.stop_ids == (151645, 151643)
  assert ours.decode(ours.encode("a<|im_end|>b"), skip_special_tokens=True) == "ab"


def test_tokenizer_json_written_by_transformers_loads(tmp_path, reference, ours):
  reference.save_pretrained(tmp_path)
  assert (tmp_path / "tokenizer.json").is_file()
  from_json = load_tokenizer(tmp_path)
  for text in HANDWRITTEN:
    assert from_json.encode(text) == ours.encode(text)


def test_unknown_path_is_a_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="no tokenizer found"):
    load_tokenizer(tmp_path)
