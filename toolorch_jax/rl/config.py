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
class RunConfig:
  model: ModelSection = dataclasses.field(default_factory=ModelSection)
  env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
  rewards: RewardConfig = dataclasses.field(default_factory=RewardConfig)
  grpo: GRPOConfig = dataclasses.field(default_factory=GRPOConfig)
  optim: OptimConfig = dataclasses.field(default_factory=OptimConfig)
  rollout: RolloutConfig = dataclasses.field(default_factory=RolloutConfig)
  train: TrainSection = dataclasses.field(default_factory=TrainSection)
  mesh: MeshConfig = dataclasses.field(default_factory=lambda: MeshConfig(data=1, fsdp=1, tensor=1))
