"""The run configs of `toolorch train` and `toolorch sft`: one YAML each, every section typed.

Sections declared elsewhere keep their defaults where they are checked: `rollout` (the episode
knobs and sampling) in `rollout.config`, `grpo` in `rl.grpo`, `optim` in `rl.train_step`, `env` in
`envs.registry`, `rewards` in `rewards.base`, `mesh` in `model.sharding`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from toolorch_jax.config import ConfigError
from toolorch_jax.envs.registry import EnvConfig
from toolorch_jax.model.sharding import MeshConfig
from toolorch_jax.rewards.base import RewardConfig
from toolorch_jax.rl.grpo import GRPOConfig
from toolorch_jax.rl.targets import TargetConfig
from toolorch_jax.rl.train_step import OptimConfig
from toolorch_jax.rollout.config import RolloutConfig


def _one_device() -> MeshConfig:
  return MeshConfig(data=1, fsdp=1, tensor=1)


@dataclasses.dataclass
class ModelSection:
  preset: str = "tiny"  # configs/model/<preset>.yaml, or a YAML path
  overrides: list[str] = dataclasses.field(default_factory=list)  # e.g. ["remat=full"]
  init_from: str = ""  # Hugging Face directory or toolorch checkpoint to start from
  tokenizer: str = ""  # tokenizer path (directory or SentencePiece .model)
  tokenizer_vocab: int = 0  # no path: train a SentencePiece of this size on the env's texts
  vocab_from_tokenizer: bool = True  # size the embedding to the tokenizer (random init only)


@dataclasses.dataclass
class TrainSection:
  steps: int = 100
  seed: int = 0
  seq_len: int = 4096  # packed row length
  # most rows per micro-batch (gradient accumulation over the rest); a step takes it or a halving
  # of it that pads its rows by at most an eighth or one row (rl.batch.micro_batch_rows)
  micro_batch_rows: int = 4
  # > 0: the loss takes logits for at most this many tokens of a micro-batch at a time (chunks of
  # positions, each recomputed in the backward pass), never [rows x seq_len x vocab] at once; 0: all
  loss_chunk_tokens: int = 0
  # pack the samples' shared prefixes (a group's prompt, its identical first turns) once per row,
  # as prefix trees the attention mask keeps apart (rl.batch); false: every sample on its own
  share_prefixes: bool = True
  # XLA options for the train step's programs only (`rl.train_step.TrainStep`), over its CPU
  # defaults (`CPU_COMPILER_OPTIONS`); e.g. back to XLA's own fusions on CPU: {
  #   xla_cpu_experimental_ynn_fusion_type: "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE"}
  compiler_options: dict[str, Any] = dataclasses.field(default_factory=dict)
  checkpoint_every: int = 1
  keep_checkpoints: int = 3
  checkpoint_dir: str = ""  # local or gs:// (default: WORKDIR/checkpoints)
  tensorboard: bool = True
  progress: bool = True

  def __post_init__(self):
    if self.loss_chunk_tokens < 0:
      raise ConfigError(f"train.loss_chunk_tokens must be >= 0 (0: no chunking), got"
                        f" {self.loss_chunk_tokens}")
    for key, value in self.compiler_options.items():
      if not isinstance(value, (str, int, float, bool)):
        raise ConfigError(f"train.compiler_options.{key} must be a string, number or boolean,"
                          f" got {value!r}")


SELECTIONS = ("random", "reward")
SCHEDULES = ("constant", "cosine")


@dataclasses.dataclass
class WarmStartConfig:
  """SFT on demonstrations the environment generates, before RL (0 demonstrations: none)."""

  demonstrations: int = 0
  steps: int = 50
  batch_size: int = 32
  learning_rate: float = 1e-3
  # random: every choice in the demonstrations drawn by chance; reward: at one decision, every
  # choice played through the environment and the one the run's reward scores highest kept
  # (rejection sampling on the rollout split, `rl.branch_selection`)
  selection: str = "random"
  # constant, or cosine: the rate falls to 0 over the warm start's steps, so the model it ends
  # with averages its last batches rather than following the last one
  schedule: str = "constant"

  def __post_init__(self):
    if self.selection not in SELECTIONS:
      raise ConfigError(f"warmstart.selection must be one of {', '.join(SELECTIONS)},"
                        f" got '{self.selection}'")
    if self.schedule not in SCHEDULES:
      raise ConfigError(f"warmstart.schedule must be one of {', '.join(SCHEDULES)},"
                        f" got '{self.schedule}'")


@dataclasses.dataclass
class ReportConfig:
  """Held-out evaluation (per preference profile, where the environment has them) before and
  after RL, written as a report with the environment's baselines and the targets below."""

  enabled: bool = False
  split: str = "test"
  tasks: int = 100  # held-out tasks evaluated per profile (0: all)
  temperature: float = 1.0  # the policy as trained samples; 0 evaluates its greedy choices
  samples: int = 1  # episodes per task and profile
  targets: list[TargetConfig] = dataclasses.field(
      default_factory=lambda: [TargetConfig(name="reward_improved")])

  def __post_init__(self):
    names = [t.name for t in self.targets]
    if len(set(names)) != len(names):
      raise ConfigError(f"report.targets: names must be unique, got {names}")


@dataclasses.dataclass
class ClusterConfig:
  """A machine a recipe is laid out for: its mesh and the memory of one device (`toolorch plan
  --config` checks the recipe against it)."""

  mesh: MeshConfig = dataclasses.field(default_factory=MeshConfig)
  hbm_gib: float = 80.0  # memory per device
  description: str = ""


@dataclasses.dataclass
class RunConfig:
  model: ModelSection = dataclasses.field(default_factory=ModelSection)
  env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
  rewards: RewardConfig = dataclasses.field(default_factory=RewardConfig)
  grpo: GRPOConfig = dataclasses.field(default_factory=GRPOConfig)
  optim: OptimConfig = dataclasses.field(default_factory=OptimConfig)
  rollout: RolloutConfig = dataclasses.field(default_factory=RolloutConfig)
  train: TrainSection = dataclasses.field(default_factory=TrainSection)
  mesh: MeshConfig = dataclasses.field(default_factory=_one_device)
  # Named meshes a recipe is laid out for; `cluster=NAME` trains on that one's mesh.
  clusters: dict[str, ClusterConfig] = dataclasses.field(default_factory=dict)
  cluster: str = ""
  warmstart: WarmStartConfig = dataclasses.field(default_factory=WarmStartConfig)
  report: ReportConfig = dataclasses.field(default_factory=ReportConfig)

  def __post_init__(self):
    if self.cluster:
      if self.cluster not in self.clusters:
        raise ConfigError(f"cluster: '{self.cluster}' is not one of clusters"
                          f" {sorted(self.clusters)}")
      self.mesh = self.clusters[self.cluster].mesh
    if self.rollout.engines > self.grpo.max_staleness + 1:
      raise ConfigError(f"rollout.engines={self.rollout.engines} needs grpo.max_staleness >="
                        f" {self.rollout.engines - 1}: at staleness {self.grpo.max_staleness} at"
                        f" most {self.grpo.max_staleness + 1} batches play at once")


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
  mesh: MeshConfig = dataclasses.field(default_factory=_one_device)
