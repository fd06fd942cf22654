"""The tokenizer a run trains when it is given none: a SentencePiece on every text its policy will
read or write, with long pieces across words, since a narrow domain repeats whole phrases."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from toolorch_jax.config import ConfigError
from toolorch_jax.distributed import barrier, is_primary
from toolorch_jax.envs.base import Environment
from toolorch_jax.rl.config import RunConfig
from toolorch_jax.tokenizer import Tokenizer, load_tokenizer, render_chat, train_sentencepiece
from toolorch_jax.tokenizer.chat_template import render_tool_call


def _demonstration_texts(demos: list[dict[str, Any]]) -> Iterator[str]:
  """What the policy writes and reads in the demonstrations after the prompt: its texts, each
  tool call as rendered, and the tool results."""
  for demo in demos:
    for message in demo["messages"]:
      if message["role"] == "assistant":
        yield message.get("content") or ""
        yield from (render_tool_call(call) for call in message.get("tool_calls") or ())
      elif message["role"] == "tool":
        yield message.get("content") or ""


def tokenizer_corpus(config: RunConfig, env: Environment,
                     demos: list[dict[str, Any]]) -> list[str]:
  """Every text the policy will read or write: each task's prompt as rendered (system turn with
  the tools, the user turn, the generation prompt), the environment's own texts, and what the
  demonstrations add to those (each distinct text once). A run without thinking appends an empty
  think block to the generation prompt: special tokens and newlines, single pieces already."""
  splits = [config.rollout.split] + ([config.report.split] if config.report.enabled else [])
  tasks = {task.task_id: task for split in splits for task in env.tasks(split)}  # each task once
  texts = []
  for task in tasks.values():
    episode = env.start(task)
    texts.append(render_chat(episode.messages(), episode.tool_schemas(), add_generation_prompt=True))
  texts += env.corpus()
  known = set(texts)
  return texts + [t for t in dict.fromkeys(_demonstration_texts(demos)) if t and t not in known]


def prepare_tokenizer(config: RunConfig, env: Environment, workdir: Path,
                      demos: list[dict[str, Any]]) -> Tokenizer:
  """`model.tokenizer`, or a SentencePiece trained on the environment's texts (kept in workdir)."""
  if config.model.tokenizer:
    return load_tokenizer(config.model.tokenizer)
  if config.model.tokenizer_vocab <= 0:
    raise ConfigError("model.tokenizer: give a tokenizer path, or model.tokenizer_vocab to train one")
  path = workdir / "tokenizer" / "tokenizer.model"
  # a domain tokenizer (long pieces across words keep prompts short), trained by process 0
  if is_primary() and not path.is_file():
    train_sentencepiece(tokenizer_corpus(config, env, demos), config.model.tokenizer_vocab,
                        path.parent, max_piece_length=64, split_by_whitespace=False)
  barrier("tokenizer")
  return load_tokenizer(path)
