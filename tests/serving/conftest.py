"""Serving fixtures: a SentencePiece tokenizer and a tiny Qwen3 taught to call a tool."""

import json
import shutil

import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

pytest.importorskip("jetstream", reason="serving tests need the 'serve' extra and JetStream 0.2.2")

from toolorch_jax.datadir import data_path  # noqa: E402
from toolorch_jax.model import create_model, load_model_config, save_hf  # noqa: E402
from toolorch_jax.tokenizer import load_tokenizer, render_chat, train_sentencepiece  # noqa: E402

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
WEATHER_QUESTION = [{"role": "user", "content": "What's the weather in Paris?"}]
WEATHER_ANSWER = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
                  "</tool_call><|im_end|>")
GREETING = [{"role": "user", "content": "Say hello."}]
GREETING_ANSWER = "Hello! How can I help you today?<|im_end|>"


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory):
  with data_path("gsm8k/test.jsonl").open(encoding="utf-8") as lines:
    questions = [json.loads(line)["question"] for line in lines]
  extra = [render_chat(WEATHER_QUESTION, [WEATHER_TOOL], add_generation_prompt=True), WEATHER_ANSWER,
           GREETING_ANSWER]
  path = train_sentencepiece(questions + extra, 512, tmp_path_factory.mktemp("sp"))
  return load_tokenizer(path)


@pytest.fixture(scope="session")
def tiny_config(tokenizer):
  return load_model_config("tiny").replace(vocab_size=tokenizer.vocab_size)


def _sft_batch(tokenizer):
  rows = []
  for messages, tools, answer in [(WEATHER_QUESTION, [WEATHER_TOOL], WEATHER_ANSWER),
                                  (GREETING, None, GREETING_ANSWER)]:
    prompt = tokenizer.encode(render_chat(messages, tools, add_generation_prompt=True,
                                          enable_thinking=False))
    rows.append((prompt, tokenizer.encode(answer)))
  length = max(len(p) + len(a) for p, a in rows)
  tokens = np.full((len(rows), length), tokenizer.pad_id, np.int32)
  target_mask = np.zeros((len(rows), length), np.float32)
  attention = np.zeros((len(rows), length), np.int32)
  for i, (prompt, answer) in enumerate(rows):
    ids = prompt + answer
    tokens[i, :len(ids)] = ids
    attention[i, :len(ids)] = 1
    target_mask[i, len(prompt):len(ids)] = 1
  return jnp.asarray(tokens), jnp.asarray(attention), jnp.asarray(target_mask)


@pytest.fixture(scope="session")
def tool_calling_model_dir(tokenizer, tiny_config, tmp_path_factory):
  """A tiny model overfitted to answer the weather question with a tool call (and to greet)."""
  model = create_model(tiny_config, seed=0)
  optimizer = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)
  tokens, attention, target_mask = _sft_batch(tokenizer)
  positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)

  @nnx.jit
  def step(model, optimizer):
    def loss_fn(model):
      logits, _ = model(tokens[:, :-1], positions[:, :-1], attention_mask=attention[:, :-1])
      ce = optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:])
      return (ce * target_mask[:, 1:]).sum() / target_mask[:, 1:].sum()
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss

  for _ in range(400):
    if float(step(model, optimizer)) < 0.01:
      break
  directory = tmp_path_factory.mktemp("hf") / "tool-caller"
  save_hf(model, tiny_config, directory)
  shutil.copy(tokenizer.source, directory / "tokenizer.model")
  return directory
