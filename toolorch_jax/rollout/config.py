"""The rollout settings, declared once: the episode knobs (shared by training, evaluation and
`toolorch eval`), and what a training run adds (sampling, engine slots, group size, split)."""

from __future__ import annotations

import dataclasses

from toolorch_jax.config import ConfigError
from toolorch_jax.serving.engine_config import SERVED_LAYOUTS


@dataclasses.dataclass
class EpisodeConfig:
  """How one episode is played."""

  max_turns: int = 30  # ToolOrchestra's default
  max_context: int = 8192  # tokens per episode, prompt included
  max_new_tokens: int = 1024  # per assistant turn
  enable_thinking: bool = True
  tool_timeout_s: float = 120.0
  max_observation_chars: int = 20_000  # longer tool results are cut (and counted as a fault)
  concurrency: int = 64  # episodes in flight

  def __post_init__(self):
    for name in ("max_turns", "max_context", "max_new_tokens", "max_observation_chars",
                 "concurrency"):
      if getattr(self, name) < 1:
        raise ConfigError(f"rollout.{name} must be >= 1, got {getattr(self, name)}")


@dataclasses.dataclass
class RolloutConfig(EpisodeConfig):
  """Episodes as a training run plays them: sampled on the in-process engine, in groups."""

  group_size: int = 8  # ToolOrchestra: 8 episodes per task
  tasks_per_step: int = 16  # ToolOrchestra: 16 tasks per step
  temperature: float = 1.0
  top_p: float = 1.0
  slots: int = 32  # engine decode slots
  # >0: a turn reuses the KV of its episode's previous turns (kept in the slots and in this many
  # more cache rows): much less prefill, but a token's numbers then depend on which rows were
  # still cached, so a rerun or a resumed run is no longer bit-identical. 0: no reuse.
  prefix_store_rows: int = 0
  # Engines that play training batches. With `grpo.max_staleness` = s, up to s + 1 batches may
  # be played at once, each by its own policy version, so each needs an engine of its own: more
  # engines let the next batch start while the last one still waits on its tools. Each engine
  # holds its own weights and KV cache; evaluation uses the first.
  engines: int = 1
  # How the engines store the weights they serve (`EngineConfig.weight_layout`): "model" serves
  # the trainer's layout; "out_in" a permuted copy, faster on some CPUs (bench/README.md).
  weight_layout: str = "model"
  split: str = "train"

  def __post_init__(self):
    super().__post_init__()
    for name in ("group_size", "tasks_per_step", "slots", "engines"):
      if getattr(self, name) < 1:
        raise ConfigError(f"rollout.{name} must be >= 1, got {getattr(self, name)}")
    if self.prefix_store_rows < 0:
      raise ConfigError(f"rollout.prefix_store_rows must be >= 0, got {self.prefix_store_rows}")
    if self.weight_layout not in SERVED_LAYOUTS:
      raise ConfigError(
          f"rollout.weight_layout must be one of {SERVED_LAYOUTS}, got '{self.weight_layout}'")
