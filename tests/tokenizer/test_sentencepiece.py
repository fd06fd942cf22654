"""The project's own SentencePiece tokenizers speak the same chat protocol."""

import json
import subprocess
import sys

from toolorch_jax.tokenizer import CHAT_TOKENS, load_tokenizer, render_chat


def test_every_chat_token_is_one_id_and_round_trips(sp_tokenizer):
  ids = sp_tokenizer.special_ids()
  assert sorted(ids) == sorted(CHAT_TOKENS) and len(set(ids.values())) == len(CHAT_TOKENS)
  for token, token_id in ids.items():
    assert sp_tokenizer.encode(token) == [token_id]
    assert sp_tokenizer.decode([token_id]) == token
    assert sp_tokenizer.encode(f"x {token} y").count(token_id) == 1
  assert sp_tokenizer.stop_ids == (ids["<|im_end|>"], ids["<|endoftext|>"])


def test_any_text_round_trips_exactly(sp_tokenizer):
  texts = [
      render_chat([{"role": "system", "content": "Be  brief.\n"},
                   {"role": "user", "content": "  How many   eggs?\n\n"},
                   {"role": "assistant", "content": "12", "reasoning_content": "3 * 4",
                    "tool_calls": [{"name": "python", "arguments": {"code": "print(3*4)"}}]}],
                  tools=[{"name": "python"}], add_generation_prompt=True),
      "unseen: 東京 🚀 Ωμέγα \t tabs \r\n", "", "   ",
  ]
  for text in texts:
    assert sp_tokenizer.decode(sp_tokenizer.encode(text)) == text
  assert sp_tokenizer.decode(sp_tokenizer.encode("a<|im_end|>b"), skip_special_tokens=True) == "ab"


def test_cli_trains_a_tokenizer(tmp_path):
  corpus = tmp_path / "corpus.jsonl"
  corpus.write_text("\n".join(json.dumps({"text": f"sample {i} of the corpus, number {i * 7}"})
                              for i in range(300)))
  out = tmp_path / "tok"
  result = subprocess.run([sys.executable, "-m", "toolorch_jax.cli", "tokenizer", "train",
                           "--corpus", str(corpus), "--vocab-size", "300", "--out", str(out)],
                          capture_output=True, text=True)
  assert result.returncode == 0, result.stderr
  tokenizer = load_tokenizer(out)
  assert tokenizer.vocab_size == 300
  assert tokenizer.encode("<tool_call>") == [tokenizer.special_ids()["<tool_call>"]]
  bad = subprocess.run([sys.executable, "-m", "toolorch_jax.cli", "tokenizer", "train", "--corpus",
                        str(corpus), "--field", "body", "--vocab-size", "300", "--out", str(out)],
                       capture_output=True, text=True)
  assert bad.returncode == 2 and "corpus.jsonl:1: no string field 'body'" in bad.stderr
