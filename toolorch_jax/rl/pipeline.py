"""`toolorch train`: tokenizer, warm start, evaluation before, GRPO, evaluation after, report.

Each stage is skipped when its config asks for nothing, and resumes from what a previous run in
the same workdir left (a trained tokenizer, a warm-start model, the "before" evaluation, RL
checkpoints), so running the command again continues the run. What the config asks of the
environment is checked first (`rl.checks`), before any stage spends time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from toolorch_jax import checkpoint
from toolorch_jax.distributed import allgather_objects, barrier, is_primary
from toolorch_jax.envs.base import Environment
from toolorch_jax.envs.registry import build_env
from toolorch_jax.model import local_mesh
from toolorch_jax.rl.branch_selection import select_branches
from toolorch_jax.rl.checks import check_run
from toolorch_jax.rl.config import RunConfig, SFTConfig, SFTData
from toolorch_jax.rl.report import evaluate_profiles, write_report
from toolorch_jax.rl.sft import run_sft
from toolorch_jax.rl.tokenizer_stage import prepare_tokenizer
from toolorch_jax.rl.train_step import OptimConfig
from toolorch_jax.rl.trainer import Trainer
from toolorch_jax.rollout.engine_rollout import Rollout
from toolorch_jax.tokenizer import Tokenizer


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def prepare_demonstrations(config: RunConfig, env: Environment, workdir: Path) -> Tokenizer:
  """Writes the warm start's demonstrations once into `workdir/warmstart` (process 0) and
  returns the run's tokenizer, which knows their texts. With `warmstart.selection: reward` the
  tokenizer learns every branch (it tokenises the episodes that choose between them), and the
  demonstrations are the branches the run's reward chose (`selection.json` says how they
  compared)."""
  ws = config.warmstart
  path = workdir / "warmstart" / "demonstrations.jsonl"
  tasks = env.tasks(config.rollout.split)
  if ws.selection == "random":
    if is_primary() and not path.is_file():
      _write_jsonl(path, env.demonstrations(tasks, ws.demonstrations, config.train.seed))
    barrier("demonstrations")
    return prepare_tokenizer(config, env, workdir,
                             [json.loads(line) for line in path.read_text().splitlines()])
  groups = env.demonstration_branches(tasks, ws.demonstrations, config.train.seed)
  tokenizer = prepare_tokenizer(config, env, workdir,
                                [demo for group in groups for demo in group.demonstrations])
  if is_primary() and not path.is_file():
    selection = select_branches(env, groups, config.rewards, tokenizer, config.rollout,
                                config.train.seed)
    _write_jsonl(path, selection.demonstrations)
    (path.parent / "selection.json").write_text(json.dumps(selection.summary, indent=2))
  barrier("demonstrations")
  return tokenizer


def warm_start(config: RunConfig, tokenizer: Tokenizer, workdir: Path) -> str:
  """Trains on the demonstrations; returns the model directory for `model.init_from`."""
  out = workdir / "warmstart"
  # Process 0 decides: the processes train together, or not at all.
  if not allgather_objects(checkpoint.is_model_checkpoint(str(out / "model")))[0]:
    ws = config.warmstart
    sft = SFTConfig(model=config.model,
                    data=SFTData(str(out / "demonstrations.jsonl"), ws.batch_size,
                                 config.rollout.enable_thinking),
                    optim=OptimConfig(learning_rate=ws.learning_rate, weight_decay=0.0,
                                      decay_steps=ws.steps if ws.schedule == "cosine" else 0),
                    train=dataclasses.replace(config.train, steps=ws.steps), mesh=config.mesh)
    run_sft(sft, out, tokenizer)
  return str(out / "model")


def start_rollout(config: RunConfig, trainer: Trainer) -> Rollout:
  """The Rollout serving the trainer's current weights as its policy version, on this host's
  devices of the trainer's mesh (all of them on one process)."""
  return Rollout(trainer.model(), trainer.tokenizer, config.rollout,
                 mesh=local_mesh(trainer.learner.mesh), seed=config.train.seed, version=trainer.step)


def train_on_engines(config: RunConfig, trainer: Trainer, rollout: Rollout) -> None:
  """Runs `trainer` on `rollout` and on `rollout.engines` - 1 more engines, started for the
  batches that play at once and stopped after training."""
  with contextlib.ExitStack() as more:
    trainer.run(rollout, [more.enter_context(contextlib.closing(start_rollout(config, trainer)))
                          for _ in range(config.rollout.engines - 1)])


def run_training(config: RunConfig, workdir: str | Path) -> dict | None:
  """Runs every configured stage; returns the report when one is configured (on process 0, which
  writes it; None on the others)."""
  start = time.perf_counter()
  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  env = build_env(config.env)
  check_run(config, env)
  warm = bool(config.warmstart.demonstrations and not config.model.init_from)

  # ----- tokenizer and warm start -----------------------------------------------------------------
  if warm:
    tokenizer = prepare_demonstrations(config, env, workdir)
    config = dataclasses.replace(config, model=dataclasses.replace(
        config.model, init_from=warm_start(config, tokenizer, workdir)))
  else:
    tokenizer = prepare_tokenizer(config, env, workdir, [])

  # ----- GRPO, with the held-out evaluation before and after --------------------------------------
  trainer = Trainer(config, workdir, tokenizer, env)
  before_file = workdir / "eval_before.json"
  with contextlib.closing(start_rollout(config, trainer)) as rollout:
    # Process 0 decides, so every process plays the same evaluations (they exchange episodes).
    if config.report.enabled and not allgather_objects(before_file.is_file())[0]:
      before = evaluate_profiles(env, rollout, config)
      if is_primary():
        before_file.write_text(json.dumps(before, indent=2))
    train_on_engines(config, trainer, rollout)
    if not config.report.enabled:
      return None
    after = evaluate_profiles(env, rollout, config)
  if not is_primary():
    return None

  # ----- report -----------------------------------------------------------------------------------
  before = json.loads(before_file.read_text())
  return write_report(workdir, config, env, before, after, time.perf_counter() - start)
