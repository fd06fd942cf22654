"""Supervised warm start: next-token training on demonstration conversations.

Each demonstration is a JSONL line `{"messages": [...], "tools": [...]}` in OpenAI chat format,
with tool calls. It is tokenised exactly as an episode is (`ChatEpisode`: prompt, then assistant
turns as policy tokens with loss mask 1, tool results and user turns with mask 0), so the policy
is warm-started on the same token protocol RL later trains it on.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Sequence

import jax
import numpy as np
from flax import nnx

from toolorch_jax import checkpoint
from toolorch_jax.config import ConfigError, to_yaml
from toolorch_jax.metrics import MetricsWriter
from toolorch_jax.rl.batch import Episode, pack
from toolorch_jax.rl.config import ModelSection, TrainSection
from toolorch_jax.rl.train_step import OptimConfig, StepFunctions, build_optimizer, sft_objective
from toolorch_jax.model.sharding import MeshConfig
from toolorch_jax.tokenizer import ChatEpisode, Tokenizer, load_tokenizer


@dataclasses.dataclass
class SFTData:
  path: str = ""  # JSONL of {"messages": [...], "tools": [...]}
  batch_size: int = 16  # demonstrations per step
  enable_thinking: bool = True


@dataclasses.dataclass
class SFTConfig:
  model: ModelSection = dataclasses.field(default_factory=ModelSection)
  data: SFTData = dataclasses.field(default_factory=SFTData)
  optim: OptimConfig = dataclasses.field(default_factory=lambda: OptimConfig(learning_rate=1e-4))
  train: TrainSection = dataclasses.field(default_factory=TrainSection)
  mesh: MeshConfig = dataclasses.field(default_factory=lambda: MeshConfig(data=1, fsdp=1, tensor=1))


def demonstration_episode(tokenizer: Tokenizer, messages: Sequence[dict[str, Any]],
                          tools: Sequence[dict] | None, enable_thinking: bool = True) -> ChatEpisode:
  """The episode a policy would have produced for this conversation (assistant turns masked 1)."""
  first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), None)
  if first is None:
    raise ValueError("the conversation has no assistant turn to learn from")
  episode = ChatEpisode.start(tokenizer, messages[:first], tools, enable_thinking)
  index = first
  while index < len(messages):
    message = messages[index]
    role = message.get("role")
    if role == "assistant":
      episode.append_assistant(message)
      index += 1
    elif role == "tool":
      results = []
      while index < len(messages) and messages[index].get("role") == "tool":
        results.append(messages[index].get("content") or "")
        index += 1
      episode.append_tool_responses(results)
    elif role == "user":
      episode.append_user(message.get("content") or "")
      index += 1
    else:
      raise ValueError(f"messages[{index}]: role {role!r} cannot follow the first assistant turn")
  return episode


def read_demonstrations(path: str, tokenizer: Tokenizer, enable_thinking: bool) -> list[Episode]:
  file = Path(path)
  if not file.is_file():
    raise ConfigError(f"data.path: file not found: {path}")
  episodes = []
  for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
      chat = demonstration_episode(tokenizer, record["messages"], record.get("tools"), enable_thinking)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
      raise ConfigError(f"{path}:{number}: not a demonstration ({type(err).__name__}: {err})") from None
    episodes.append(Episode(chat.ids, chat.loss_mask))
  if not episodes:
    raise ConfigError(f"data.path: {path} holds no demonstrations")
  return episodes


def run_sft(config: SFTConfig, workdir: str | Path, tokenizer: Tokenizer | None = None):
  """Trains for `train.steps` steps over the demonstrations (epoch after epoch, seeded order),
  checkpoints like RL, and writes the final model to `workdir/model` for `model.init_from`."""
  from toolorch_jax.rl.config import RunConfig
  from toolorch_jax.rl.trainer import initial_model, mesh_for

  workdir = Path(workdir)
  tokenizer = tokenizer or load_tokenizer(config.model.tokenizer)
  episodes = read_demonstrations(config.data.path, tokenizer, config.data.enable_thinking)
  mesh = mesh_for(config.mesh)
  model = initial_model(RunConfig(model=config.model, train=config.train), tokenizer, mesh)
  graphdef, params = nnx.split(model)
  optimizer = build_optimizer(config.optim)
  with jax.set_mesh(mesh):
    opt_state = jax.jit(optimizer.init)(params)
  steps = StepFunctions(graphdef, optimizer, sft_objective, "token_mean", mesh)
  checkpointer = checkpoint.TrainCheckpointer(str(workdir / "checkpoints"),
                                              keep=config.train.keep_checkpoints)
  step, rng = 0, jax.random.key(config.train.seed)
  if checkpointer.latest_step() is not None:
    step, params, opt_state, rng = checkpointer.restore(
        None, checkpoint.abstract_like(params), checkpoint.abstract_like(opt_state))[:4]
  writer = MetricsWriter(str(workdir), config.train.steps, use_tensorboard=config.train.tensorboard,
                         progress=config.train.progress)
  rows = config.train.micro_batch_rows
  try:
    while step < config.train.steps:
      start = time.perf_counter()
      order = np.random.default_rng([config.train.seed, step]).permutation(len(episodes))
      chosen = [episodes[i] for i in order[:config.data.batch_size]]
      batch = pack(chosen, config.train.seq_len, rows_multiple=rows, pad_id=tokenizer.pad_id)
      micro = batch.micro_batches(batch.tokens.shape[0] // rows)
      params, opt_state, metrics = steps.update(params, opt_state, micro, batch.num_tokens,
                                                batch.num_sequences)
      step += 1
      metrics = {k: float(v) for k, v in jax.device_get(metrics).items() if k in ("loss", "grad_norm", "entropy")}
      metrics.update({"tokens": float(batch.num_tokens), "step_seconds": time.perf_counter() - start})
      writer.write(step, {f"sft/{k}": v for k, v in metrics.items()})
      if step % config.train.checkpoint_every == 0 or step == config.train.steps:
        checkpointer.save(step, params, opt_state, rng, {}, to_yaml(config), {})
    checkpointer.wait()
  finally:
    writer.close()
  model = nnx.merge(graphdef, params)
  final = workdir / "model"
  if not checkpoint.is_model_checkpoint(str(final)):
    checkpoint.save_model(model, model.config, str(final))
  return model
