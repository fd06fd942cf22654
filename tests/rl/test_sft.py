"""SFT warm start: demonstrations tokenised as episodes, loss falls, the model feeds RL."""

import json

import pytest

from toolorch_jax import checkpoint
from toolorch_jax.config import ConfigError, load_config
from toolorch_jax.datadir import data_path
from toolorch_jax.rl.config import SFTConfig
from toolorch_jax.rl.sft import demonstration_transcript, run_sft
from toolorch_jax.tokenizer import load_tokenizer, render_chat, train_sentencepiece

TOOLS = [{"type": "function", "function": {"name": "answer", "parameters": {"type": "object"}}}]


def conversation(i):
  return {"tools": TOOLS, "messages": [
      {"role": "user", "content": f"Question {i}?"},
      {"role": "assistant", "content": "", "reasoning_content": "Ask a model.",
       "tool_calls": [{"name": "answer", "arguments": {"model": f"m{i % 2}"}}]},
      {"role": "tool", "content": f"result {i}"},
      {"role": "assistant", "content": f"The answer is {i}.", "reasoning_content": "Done."}]}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
  with data_path("gsm8k/test.jsonl").open(encoding="utf-8") as lines:
    questions = [json.loads(line)["question"] for line in lines]
  return load_tokenizer(train_sentencepiece(questions, 512, tmp_path_factory.mktemp("tok")))


def test_demonstration_tokens_match_the_rendered_conversation(tokenizer):
  """With reasoning in every turn the template rewrites nothing: demo == full render."""
  demo = conversation(3)
  transcript = demonstration_transcript(tokenizer, demo["messages"], demo["tools"])
  full = tokenizer.encode(render_chat(demo["messages"], demo["tools"]))
  assert transcript.ids + tokenizer.encode("\n") == full
  policy = [i for i, m in zip(transcript.ids, transcript.loss_mask) if m]
  assert tokenizer.decode(policy).count("<|im_end|>") == 2  # both assistant turns, nothing else


def test_sft_learns_and_writes_a_model_for_rl(tokenizer, tmp_path):
  data = tmp_path / "demos.jsonl"
  data.write_text("\n".join(json.dumps(conversation(i)) for i in range(12)))
  (tmp_path / "sft.yaml").write_text(f"""
model: {{preset: tiny, tokenizer: {tokenizer.source}}}
data: {{path: {data}, batch_size: 6}}
optim: {{learning_rate: 0.003}}
train: {{steps: 12, seq_len: 512, micro_batch_rows: 2, progress: false}}
""")
  run_sft(load_config(SFTConfig, tmp_path / "sft.yaml"), tmp_path / "run", tokenizer)
  losses = [json.loads(line)["sft/loss"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
  assert len(losses) == 12 and losses[-1] < 0.6 * losses[0]
  model, config = checkpoint.load_model(str(tmp_path / "run" / "model"))
  assert config.vocab_size == tokenizer.vocab_size


def test_bad_demonstrations_name_the_line(tokenizer, tmp_path):
  data = tmp_path / "bad.jsonl"
  data.write_text(json.dumps(conversation(1)) + "\n" + json.dumps({"messages": [{"role": "user", "content": "x"}]}))
  config = SFTConfig()
  config.model.tokenizer, config.data.path = tokenizer.source, str(data)
  with pytest.raises(ConfigError, match=r"bad.jsonl:2: not a demonstration .*no assistant turn"):
    run_sft(config, tmp_path / "run", tokenizer)
