"""`toolorch train`: tokenizer, warm start, evaluation before, GRPO, evaluation after, report.

Each stage is skipped when its config asks for nothing, and resumes from what a previous run in
the same workdir left (a trained tokenizer, a warm-start model, the "before" evaluation, RL
checkpoints), so running the command again continues the run.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from toolorch_jax import checkpoint
from toolorch_jax.config import ConfigError
from toolorch_jax.envs.registry import build_env
from toolorch_jax.rl.config import RunConfig
from toolorch_jax.rl.report import evaluate_profiles, write_report
from toolorch_jax.rl.sft import SFTConfig, SFTData, run_sft
from toolorch_jax.rl.train_step import OptimConfig
from toolorch_jax.rl.trainer import Trainer
from toolorch_jax.tokenizer import Tokenizer, load_tokenizer, train_sentencepiece


def prepare_tokenizer(config: RunConfig, env, workdir: Path) -> Tokenizer:
  """`model.tokenizer`, or a SentencePiece trained on the environment's texts (kept in workdir)."""
  if config.model.tokenizer:
    return load_tokenizer(config.model.tokenizer)
  if config.model.tokenizer_vocab <= 0:
    raise ConfigError("model.tokenizer: give a tokenizer path, or model.tokenizer_vocab to train one")
  path = workdir / "tokenizer" / "tokenizer.model"
  if not path.is_file():  # a domain tokenizer: long pieces across words keep prompts short
    train_sentencepiece(env.corpus(), config.model.tokenizer_vocab, path.parent,
                        max_piece_length=64, split_by_whitespace=False)
  return load_tokenizer(path)


def warm_start(config: RunConfig, env, tokenizer: Tokenizer, workdir: Path) -> str:
  """Trains on the environment's demonstrations; returns the model directory for init_from."""
  out = workdir / "warmstart"
  if not checkpoint.is_model_checkpoint(str(out / "model")):
    ws = config.warmstart
    demos = env.demonstrations(env.tasks(config.rollout.split), ws.demonstrations, config.train.seed)
    out.mkdir(parents=True, exist_ok=True)
    data = out / "demonstrations.jsonl"
    data.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in demos))
    sft = SFTConfig(model=config.model, data=SFTData(str(data), ws.batch_size, config.rollout.enable_thinking),
                    optim=OptimConfig(learning_rate=ws.learning_rate, weight_decay=0.0),
                    train=dataclasses.replace(config.train, steps=ws.steps), mesh=config.mesh)
    run_sft(sft, out, tokenizer)
  return str(out / "model")


def run_training(config: RunConfig, workdir: str | Path) -> dict | None:
  """Runs every configured stage; returns the report when one is configured."""
  start = time.perf_counter()
  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  env = build_env(config.env)
  tokenizer = prepare_tokenizer(config, env, workdir)
  if config.warmstart.demonstrations and not config.model.init_from:
    config = dataclasses.replace(config, model=dataclasses.replace(
        config.model, init_from=warm_start(config, env, tokenizer, workdir)))
  trainer = Trainer(config, workdir, tokenizer, env)
  try:
    before_file = workdir / "eval_before.json"
    if config.report.enabled and not before_file.is_file():
      before_file.write_text(json.dumps(evaluate_profiles(trainer, config), indent=2))
    trainer.run()
    if not config.report.enabled:
      return None
    after = evaluate_profiles(trainer, config)
  finally:
    trainer.close()
  before = json.loads(before_file.read_text())
  return write_report(workdir, config, env, before, after, time.perf_counter() - start)
