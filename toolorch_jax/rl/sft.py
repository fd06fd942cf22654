"""Supervised warm start: next-token training on demonstration conversations.

Each demonstration is a JSONL line `{"messages": [...], "tools": [...]}` in OpenAI chat format,
with tool calls. It is tokenised exactly as an episode is (a `Transcript`: prompt, then assistant
turns as policy tokens with loss mask 1, tool results and user turns with mask 0), so the policy
is warm-started on the same token protocol RL later trains it on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from toolorch_jax import checkpoint
from toolorch_jax.config import ConfigError, to_yaml
from toolorch_jax.data.jsonl import read_jsonl
from toolorch_jax.model import Qwen3
from toolorch_jax.rl.batch import Sample
from toolorch_jax.rl.config import SFTConfig
from toolorch_jax.rl.learner import Learner
from toolorch_jax.rl.train_step import sft_objective
from toolorch_jax.tokenizer import Tokenizer, Transcript, load_tokenizer

SFT_FIGURES = ("loss", "grad_norm", "entropy", "tokens")


def demonstration_transcript(tokenizer: Tokenizer, messages: Sequence[dict[str, Any]],
                             tools: Sequence[dict] | None, enable_thinking: bool = True) -> Transcript:
  """The transcript a policy would have produced for this conversation (assistant turns masked 1)."""
  first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), None)
  if first is None:
    raise ValueError("the conversation has no assistant turn to learn from")
  transcript = Transcript.start(tokenizer, messages[:first], tools, enable_thinking)
  index = first
  while index < len(messages):
    message = messages[index]
    role = message.get("role")
    if role == "assistant":
      transcript.append_assistant(message)
      index += 1
    elif role == "tool":
      results = []
      while index < len(messages) and messages[index].get("role") == "tool":
        results.append(messages[index].get("content") or "")
        index += 1
      transcript.append_tool_responses(results)
    elif role == "user":
      transcript.append_user(message.get("content") or "")
      index += 1
    else:
      raise ValueError(f"messages[{index}]: role {role!r} cannot follow the first assistant turn")
  return transcript


def read_demonstrations(path: str, tokenizer: Tokenizer, enable_thinking: bool) -> list[Sample]:
  samples = []
  for where, record in read_jsonl(path, "data.path"):
    try:
      transcript = demonstration_transcript(tokenizer, record["messages"], record.get("tools"),
                                            enable_thinking)
    except (KeyError, TypeError, ValueError) as err:
      raise ConfigError(f"{where}: not a demonstration ({type(err).__name__}: {err})") from None
    samples.append(Sample(transcript.ids, transcript.loss_mask))
  if not samples:
    raise ConfigError(f"data.path: {path} holds no demonstrations")
  return samples


def run_sft(config: SFTConfig, workdir: str | Path, tokenizer: Tokenizer | None = None) -> Qwen3:
  """Trains for `train.steps` steps over the demonstrations (epoch after epoch, seeded order),
  checkpoints like RL, and writes the final model to `workdir/model` for `model.init_from`."""
  workdir = Path(workdir)
  tokenizer = tokenizer or load_tokenizer(config.model.tokenizer)
  samples = read_demonstrations(config.data.path, tokenizer, config.data.enable_thinking)
  learner = Learner(config.model, config.optim, config.train, config.mesh, sft_objective,
                    "token_mean", tokenizer, workdir)
  learner.restore()

  def one_step(step: int) -> dict:
    order = np.random.default_rng([config.train.seed, step - 1]).permutation(len(samples))
    figures = learner.update([samples[i] for i in order[:config.data.batch_size]])
    return {f"sft/{name}": figures[name] for name in SFT_FIGURES}

  learner.run(one_step, to_yaml(config))
  model = learner.model()
  final = workdir / "model"
  if not checkpoint.is_model_checkpoint(str(final)):
    checkpoint.save_model(model, model.config, str(final))
  return model
