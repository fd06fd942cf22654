"""Qwen3 in Flax NNX: config, presets, sharding, KV cache and Hugging Face import/export."""

from toolorch_jax.model.cache import KVCache
from toolorch_jax.model.config import ModelConfig, from_hf_config, load_model_config, preset_names
from toolorch_jax.model.hf import WEIGHT_MAP, load_hf, save_hf
from toolorch_jax.model.qwen3 import Qwen3, abstract_model, create_model, shard_model
from toolorch_jax.model.sharding import MeshConfig, local_mesh, make_mesh

__all__ = [
    "KVCache", "MeshConfig", "WEIGHT_MAP", "ModelConfig", "Qwen3", "abstract_model", "create_model",
    "from_hf_config", "load_hf", "load_model_config", "local_mesh", "make_mesh", "preset_names", "save_hf", "shard_model",
]

