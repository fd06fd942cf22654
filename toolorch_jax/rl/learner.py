"""What SFT and GRPO share: the mesh, the model, the optimizer and its state, the jitted train
step, checkpoints with restore, metrics, and the step loop that ties them together.

Each objective only says what one step does (`Learner.run(one_step)`): the learner counts steps,
writes metrics, and checkpoints every `train.checkpoint_every` steps and at the end, so a run
killed at any point resumes from its latest checkpoint with the same result.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

import jax
from flax import nnx

from toolorch_jax import checkpoint
from toolorch_jax.config import ConfigError
from toolorch_jax.distributed import is_primary
from toolorch_jax.metrics import MetricsWriter
from toolorch_jax.model import MeshConfig, Qwen3, create_model, load_model_config, make_mesh
from toolorch_jax.model.sharding import within
from toolorch_jax.rl.batch import Sample, micro_batch_rows, pack
from toolorch_jax.rl.config import ModelSection, TrainSection
from toolorch_jax.rl.train_step import OptimConfig, TrainStep, build_optimizer
from toolorch_jax.tokenizer import Tokenizer


LOSS_WIDTHS = "loss_widths"  # the checkpoint's extra entry for Learner.loss_widths


def initial_model(section: ModelSection, tokenizer: Tokenizer, mesh, seed: int) -> Qwen3:
  """A preset with random weights (sized to the tokenizer), or the weights in `model.init_from`."""
  if section.init_from:
    model, _ = checkpoint.load_pretrained(section.init_from, mesh=mesh)
  else:
    model_config = load_model_config(section.preset, section.overrides)
    if section.vocab_from_tokenizer:
      model_config = model_config.replace(vocab_size=tokenizer.vocab_size)
    model = create_model(model_config, mesh=mesh, seed=seed)
  if tokenizer.vocab_size > model.config.vocab_size:
    raise ConfigError(f"model.tokenizer has {tokenizer.vocab_size} ids, the model only"
                      f" {model.config.vocab_size}")
  return model


class Learner:
  """The trainable state of a run in `workdir` and the one step that updates it."""

  def __init__(self, model: ModelSection, optim: OptimConfig, train: TrainSection,
               mesh: MeshConfig, objective: Callable, aggregation: str, tokenizer: Tokenizer,
               workdir: str | Path):
    self.train = train
    self.tokenizer = tokenizer
    self.workdir = Path(workdir)
    self.mesh = make_mesh(mesh)
    self.graphdef, self.params = nnx.split(initial_model(model, tokenizer, self.mesh, train.seed))
    self.optimizer = build_optimizer(optim)
    with within(self.mesh):
      self.opt_state = jax.jit(self.optimizer.init)(self.params)
    self.train_step = TrainStep(self.graphdef, self.optimizer, objective, aggregation, self.mesh,
                                train.loss_chunk_tokens, train.compiler_options)
    self.checkpointer = checkpoint.TrainCheckpointer(
        train.checkpoint_dir or str(self.workdir / "checkpoints"), keep=train.keep_checkpoints)
    self.rng = jax.random.key(train.seed)
    self.step = 0
    # The loss arrays' widths (targets, entries) only grow within a run, and a checkpoint keeps
    # them: a batch that needs narrower ones reuses the compiled program instead of compiling
    # another, and a resumed run packs exactly as the uninterrupted one.
    self.loss_widths = (1, 1)

  def restore(self) -> dict[str, Any] | None:
    """Continues from the latest checkpoint in the workdir; returns its data-iterator state, or
    None when there is none (a fresh run)."""
    if self.checkpointer.latest_step() is None:
      return None
    restored = self.checkpointer.restore(None, checkpoint.abstract_like(self.params),
                                         checkpoint.abstract_like(self.opt_state))
    if restored.data_state is None:
      raise ConfigError(f"{self.checkpointer.directory}: step {restored.step} was written by a job"
                        f" with another number of processes than this one ({jax.process_count()});"
                        " each process's data state is its own, so resume with the same number")
    self.step, self.params, self.opt_state, self.rng, data_state = restored[:5]
    self.loss_widths = tuple(restored.extra.get(LOSS_WIDTHS, self.loss_widths))
    return data_state

  def model(self) -> Qwen3:
    return nnx.merge(self.graphdef, self.params)

  def update(self, samples: Sequence[Sample], ref_params: Any = None) -> dict[str, float]:
    """Packs `samples` and applies one optimizer update (log-probs under `ref_params` for the KL
    term when given); returns the step's training figures."""
    batch = pack(samples, self.train.seq_len, pad_id=self.tokenizer.pad_id,
                 share_prefixes=self.train.share_prefixes, least_widths=self.loss_widths)
    self.loss_widths = (batch.loss_columns.shape[1], batch.entry_index.shape[1])
    rows = micro_batch_rows(batch.tokens.shape[0], self.train.micro_batch_rows,
                            least=self.mesh.shape["data"] * self.mesh.shape["fsdp"])
    batch = batch.padded(rows)
    micro = batch.micro_batches(batch.tokens.shape[0] // rows)
    start = time.perf_counter()
    if ref_params is not None:
      micro["ref_logp"] = self.train_step.log_probs(ref_params, micro)
    self.params, self.opt_state, figures = self.train_step.update(
        self.params, self.opt_state, micro, batch.num_tokens, batch.num_sequences)
    figures = {k: float(v) for k, v in jax.device_get(figures).items()}
    elapsed = time.perf_counter() - start
    figures.update({"tokens": float(batch.num_tokens), "truncated": float(batch.truncated),
                    "tokens_per_s": batch.sample_tokens / max(elapsed, 1e-9),
                    "shared_prefix": 1.0 - batch.packed_tokens / max(batch.sample_tokens, 1),
                    "seconds": elapsed})
    return figures

  def run(self, one_step: Callable[[int], dict[str, float]], config_yaml: str,
          data_state: Callable[[], dict[str, Any]] = dict,
          extras: Callable[[int], dict[str, Any]] = lambda step: {}) -> None:
    """Makes steps until `train.steps`: `one_step(step)` does step number `step` (1-based) and
    returns its metrics; each checkpoint keeps `data_state()` (this process's) and `extras(step)`
    beside the weights. Every process of a job runs it; files are written by one."""
    total = self.train.steps
    if is_primary():
      self.workdir.mkdir(parents=True, exist_ok=True)
      (self.workdir / "config.yaml").write_text(config_yaml)
    writer = MetricsWriter(str(self.workdir), total, use_tensorboard=self.train.tensorboard,
                           progress=self.train.progress)
    try:
      while self.step < total:
        start = time.perf_counter()
        metrics = one_step(self.step + 1)
        self.step += 1
        metrics["step_seconds"] = time.perf_counter() - start
        writer.write(self.step, metrics)
        if self.step % self.train.checkpoint_every == 0 or self.step == total:
          self.checkpointer.save(self.step, self.params, self.opt_state, self.rng, data_state(),
                                 config_yaml, {**extras(self.step),
                                               LOSS_WIDTHS: list(self.loss_widths)})
      self.checkpointer.wait()
    finally:
      writer.close()
