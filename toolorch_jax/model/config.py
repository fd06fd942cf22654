"""Qwen3 model hyper-parameters, presets from `configs/model/`, and the HF `config.json` mapping."""

from __future__ import annotations

import dataclasses
from typing import Any

from toolorch_jax.config import ConfigError, config_dir, load_config

DTYPES = ("float32", "bfloat16")
REMAT_POLICIES = ("none", "full", "dots_saveable")
WEIGHT_LAYOUTS = ("in_out", "out_in")


@dataclasses.dataclass(unsafe_hash=True)
class ModelConfig:
  """Shape and numerics of a Qwen3 decoder; field names follow MaxText/Tunix, not HF.

  Hashable because the model keeps it as static structure seen by `jax.jit`.
  """

  vocab_size: int = 151936
  hidden_size: int = 4096
  num_layers: int = 36
  num_heads: int = 32
  num_kv_heads: int = 8
  head_dim: int = 128
  intermediate_size: int = 12288
  rope_theta: float = 1_000_000.0
  rms_norm_eps: float = 1e-6
  tie_word_embeddings: bool = False
  max_position_embeddings: int = 40960
  param_dtype: str = "float32"
  dtype: str = "float32"  # compute dtype of matmuls; norms, softmax and logits stay in float32
  remat: str = "none"
  # > 0: a causal pass without a cache (training, log-probs) attends in blocks of this many queries,
  # each over the keys up to its last query, skipping the masked upper triangle: about half the
  # score work and memory of a long row. 0: one block, the whole [T, T] product.
  attention_query_block: int = 0
  # How projections are stored (`model/layout.py`): "in_out" ([in, out], as Tunix and MaxText; the
  # training and checkpoint default) or "out_in" ([out, in], as transformers; an engine may serve
  # a copy so, see `EngineConfig.weight_layout`).
  weight_layout: str = "in_out"

  def __post_init__(self):
    for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads",
                 "head_dim", "intermediate_size"):
      if getattr(self, name) <= 0:
        raise ConfigError(f"model.{name} must be positive, got {getattr(self, name)}")
    if self.num_heads % self.num_kv_heads:
      raise ConfigError(
          f"model.num_heads ({self.num_heads}) must be a multiple of model.num_kv_heads"
          f" ({self.num_kv_heads})")
    if self.attention_query_block < 0:
      raise ConfigError(
          f"model.attention_query_block must be >= 0, got {self.attention_query_block}")
    if self.head_dim % 2:
      raise ConfigError(f"model.head_dim must be even for RoPE, got {self.head_dim}")
    for name in ("param_dtype", "dtype"):
      if getattr(self, name) not in DTYPES:
        raise ConfigError(f"model.{name} must be one of {DTYPES}, got '{getattr(self, name)}'")
    if self.weight_layout not in WEIGHT_LAYOUTS:
      raise ConfigError(
          f"model.weight_layout must be one of {WEIGHT_LAYOUTS}, got '{self.weight_layout}'")
    if self.remat not in REMAT_POLICIES:
      raise ConfigError(f"model.remat must be one of {REMAT_POLICIES}, got '{self.remat}'")

  def replace(self, **changes: Any) -> "ModelConfig":
    return dataclasses.replace(self, **changes)

  @property
  def num_params(self) -> int:
    """Parameter count, to size plans and sanity-check imports."""
    attn = self.hidden_size * self.head_dim * (2 * self.num_heads + 2 * self.num_kv_heads)
    mlp = 3 * self.hidden_size * self.intermediate_size
    norms = 2 * self.hidden_size + 2 * self.head_dim
    layer = attn + mlp + norms
    embed = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
    return self.num_layers * layer + embed + self.hidden_size


def preset_names() -> list[str]:
  return sorted(p.stem for p in (config_dir() / "model").glob("*.yaml"))


def load_model_config(name_or_path: str, overrides: tuple[str, ...] | list[str] = ()) -> ModelConfig:
  """A preset name (`qwen3-8b`) or a YAML path, plus `field=value` overrides."""
  path = config_dir() / "model" / f"{name_or_path}.yaml"
  if not path.is_file():
    if name_or_path.endswith((".yaml", ".yml")):
      path = name_or_path
    else:
      raise ConfigError(
          f"unknown model preset '{name_or_path}'; known presets: {', '.join(preset_names())}")
  return load_config(ModelConfig, path, overrides)


def from_hf_config(hf: dict[str, Any], **overrides: Any) -> ModelConfig:
  """Reads a transformers Qwen3 `config.json`; refuses features this model does not implement."""
  if hf.get("model_type") not in ("qwen3", None):
    raise ConfigError(f"config.json: model_type is '{hf.get('model_type')}', expected 'qwen3'")
  rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
  if rope.get("rope_type", rope.get("type", "default")) != "default":
    raise ConfigError(f"config.json: rope scaling {rope} is not supported (only default RoPE)")
  if hf.get("use_sliding_window"):
    raise ConfigError("config.json: use_sliding_window=true is not supported")
  if hf.get("attention_bias"):
    raise ConfigError("config.json: attention_bias=true is not supported (Qwen3 has none)")
  if hf.get("hidden_act", "silu") != "silu":
    raise ConfigError(f"config.json: hidden_act '{hf['hidden_act']}' is not supported")
  theta = hf.get("rope_theta", rope.get("rope_theta", 10000.0))
  num_heads = hf["num_attention_heads"]
  fields = dict(
      vocab_size=hf["vocab_size"],
      hidden_size=hf["hidden_size"],
      num_layers=hf["num_hidden_layers"],
      num_heads=num_heads,
      num_kv_heads=hf.get("num_key_value_heads", num_heads),
      head_dim=hf.get("head_dim") or hf["hidden_size"] // num_heads,
      intermediate_size=hf["intermediate_size"],
      rope_theta=float(theta),
      rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
      tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
      max_position_embeddings=hf.get("max_position_embeddings", 40960),
  )
  fields.update(overrides)
  return ModelConfig(**fields)


def to_hf_config(config: ModelConfig, torch_dtype: str) -> dict[str, Any]:
  """The `config.json` transformers needs to rebuild this model as Qwen3ForCausalLM."""
  return {
      "architectures": ["Qwen3ForCausalLM"],
      "model_type": "qwen3",
      "vocab_size": config.vocab_size,
      "hidden_size": config.hidden_size,
      "num_hidden_layers": config.num_layers,
      "num_attention_heads": config.num_heads,
      "num_key_value_heads": config.num_kv_heads,
      "head_dim": config.head_dim,
      "intermediate_size": config.intermediate_size,
      "hidden_act": "silu",
      "rope_theta": config.rope_theta,
      "rope_scaling": None,
      "rms_norm_eps": config.rms_norm_eps,
      "tie_word_embeddings": config.tie_word_embeddings,
      "max_position_embeddings": config.max_position_embeddings,
      "attention_bias": False,
      "attention_dropout": 0.0,
      "use_sliding_window": False,
      "sliding_window": None,
      "torch_dtype": torch_dtype,
      "dtype": torch_dtype,
  }
