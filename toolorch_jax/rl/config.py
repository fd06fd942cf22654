"""The run config of `toolorch train` and `toolorch sft`: one YAML, every section typed."""

from __future__ import annotations

import dataclasses

from toolorch_jax.envs.registry import EnvConfig
from toolorch_jax.model.sharding import MeshConfig
from toolorch_jax.rewards.base import RewardConfig
from toolorch_jax.rl.grpo import GRPOConfig
from toolorch_jax.rl.train_step import OptimConfig


@dataclasses.dataclass
class ModelSection:
  preset: str = "tiny"  # configs/model/<preset>.yaml, or a YAML path
  overrides: list[str] = dataclasses.field(default_factory=list)  # e.g. ["remat=full"]
  init_from: str = ""  # Hugging Face directory or toolorch checkpoint to start from
  tokenizer: str = ""  # tokenizer path (directory or SentencePiece .model)
  tokenizer_vocab: int = 0  # no path: train a SentencePiece of this size on the env's corpus
  vocab_from_tokenizer: bool = True  # size the embedding to the tokenizer (random init only)


@dataclasses.dataclass
class RolloutConfig:
  group_size: int = 8  # ToolOrchestra: 8 episodes per task
  tasks_per_step: int = 16  # ToolOrchestra: 16 tasks per step
  temperature: float = 1.0
  top_p: float = 1.0
  max_turns: int = 30
  max_context: int = 4096
  max_new_tokens: int = 512
  concurrency: int = 64
  slots: int = 32  # engine decode slots
  enable_thinking: bool = True
  split: str = "train"


@dataclasses.dataclass
class TrainSection:
  steps: int = 100
  seed: int = 0
  seq_len: int = 4096  # packed row length
  micro_batch_rows: int = 4  # rows per micro-batch (gradient accumulation over the rest)
  checkpoint_every: int = 1
  keep_checkpoints: int = 3
  tensorboard: bool = True
  progress: bool = True


@dataclasses.dataclass
class WarmStartConfig:
  """SFT on demonstrations the environment generates, before RL (0 demonstrations: none)."""

  demonstrations: int = 0
  steps: int = 50
  batch_size: int = 32
  learning_rate: float = 1e-3


@dataclasses.dataclass
class ReportConfig:
  """Held-out evaluation per preference profile before and after RL, written as a report."""

  enabled: bool = False
  split: str = "test"
  tasks: int = 100  # held-out tasks evaluated per profile (0: all)
  temperature: float = 1.0  # the policy as trained samples; 0 evaluates its greedy choices
  samples: int = 1  # episodes per task and profile


@dataclasses.dataclass
class RunConfig:
  model: ModelSection = dataclasses.field(default_factory=ModelSection)
  env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
  rewards: RewardConfig = dataclasses.field(default_factory=RewardConfig)
  grpo: GRPOConfig = dataclasses.field(default_factory=GRPOConfig)
  optim: OptimConfig = dataclasses.field(default_factory=OptimConfig)
  rollout: RolloutConfig = dataclasses.field(default_factory=RolloutConfig)
  train: TrainSection = dataclasses.field(default_factory=TrainSection)
  mesh: MeshConfig = dataclasses.field(default_factory=lambda: MeshConfig(data=1, fsdp=1, tensor=1))
  warmstart: WarmStartConfig = dataclasses.field(default_factory=WarmStartConfig)
  report: ReportConfig = dataclasses.field(default_factory=ReportConfig)
