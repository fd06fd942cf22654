"""Hugging Face Qwen3 checkpoints in and out.

`WEIGHT_MAP` is the one table between HF tensor names and NNX parameter paths, with the layout
change each needs (HF stores `Linear.weight` as [out, in]; ours are [in, heads, head_dim] etc. so
heads can be sharded). Import reads one tensor at a time from the safetensors files and places only
each device's shard on that device; export gathers one tensor at a time and writes sharded files
with an index, the layout `transformers.AutoModelForCausalLM.from_pretrained` reads.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Iterator

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from flax import nnx
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from safetensors import safe_open
from safetensors.numpy import save_file

from toolorch_jax.config import ConfigError
from toolorch_jax.model.config import ModelConfig, from_hf_config, to_hf_config
from toolorch_jax.model.layout import relayout
from toolorch_jax.model.qwen3 import Qwen3, abstract_model

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


@dataclasses.dataclass(frozen=True)
class WeightMapping:
  hf: str  # HF tensor name; {i} is the layer index
  nnx: str  # dotted NNX parameter path
  layout: str  # copy | transpose | in_heads ([H*D, E] <-> [E, H, D]) | out_heads ([E, H*D] <-> [H, D, E])


WEIGHT_MAP = (
    WeightMapping("model.embed_tokens.weight", "embedding", "copy"),
    WeightMapping("model.norm.weight", "final_norm.scale", "copy"),
    WeightMapping("lm_head.weight", "lm_head", "transpose"),
    WeightMapping("model.layers.{i}.input_layernorm.weight", "layers.{i}.input_norm.scale", "copy"),
    WeightMapping("model.layers.{i}.post_attention_layernorm.weight",
                  "layers.{i}.post_attn_norm.scale", "copy"),
    WeightMapping("model.layers.{i}.self_attn.q_proj.weight", "layers.{i}.attn.q_proj", "in_heads"),
    WeightMapping("model.layers.{i}.self_attn.k_proj.weight", "layers.{i}.attn.k_proj", "in_heads"),
    WeightMapping("model.layers.{i}.self_attn.v_proj.weight", "layers.{i}.attn.v_proj", "in_heads"),
    WeightMapping("model.layers.{i}.self_attn.o_proj.weight", "layers.{i}.attn.o_proj", "out_heads"),
    WeightMapping("model.layers.{i}.self_attn.q_norm.weight", "layers.{i}.attn.q_norm.scale", "copy"),
    WeightMapping("model.layers.{i}.self_attn.k_norm.weight", "layers.{i}.attn.k_norm.scale", "copy"),
    WeightMapping("model.layers.{i}.mlp.gate_proj.weight", "layers.{i}.mlp.gate_proj", "transpose"),
    WeightMapping("model.layers.{i}.mlp.up_proj.weight", "layers.{i}.mlp.up_proj", "transpose"),
    WeightMapping("model.layers.{i}.mlp.down_proj.weight", "layers.{i}.mlp.down_proj", "transpose"),
)


def _template_regex(template: str) -> re.Pattern:
  return re.compile("^" + re.escape(template).replace(r"\{i\}", r"(\d+)") + "$")


_NNX_PATTERNS = [(_template_regex(m.nnx), m) for m in WEIGHT_MAP]


def hf_name_for(nnx_path: str) -> tuple[str, str]:
  """(HF tensor name, layout) for an NNX parameter path."""
  for pattern, mapping in _NNX_PATTERNS:
    if match := pattern.match(nnx_path):
      return mapping.hf.replace("{i}", match.group(1)) if match.groups() else mapping.hf, mapping.layout
  raise KeyError(f"parameter '{nnx_path}' has no entry in WEIGHT_MAP")


def to_nnx_layout(hf_array: np.ndarray, layout: str, nnx_shape: tuple[int, ...]) -> np.ndarray:
  if layout == "copy":
    return hf_array
  if layout == "transpose":
    return hf_array.T
  if layout == "in_heads":  # [H*D, E] -> [E, H, D]
    return hf_array.T.reshape(nnx_shape)
  if layout == "out_heads":  # [E, H*D] -> [H, D, E]
    return hf_array.T.reshape(nnx_shape)
  raise ValueError(layout)


def to_hf_layout(array: np.ndarray, layout: str) -> np.ndarray:
  if layout == "copy":
    return array
  if layout == "transpose":
    return array.T
  if layout == "in_heads":  # [E, H, D] -> [H*D, E]
    return array.reshape(array.shape[0], -1).T
  if layout == "out_heads":  # [H, D, E] -> [E, H*D]
    return array.reshape(-1, array.shape[-1]).T
  raise ValueError(layout)


def _params(model: Qwen3) -> Iterator[tuple[str, nnx.Param]]:
  for path, node in nnx.iter_graph(model):
    if isinstance(node, nnx.Param):
      yield ".".join(str(p) for p in path), node


class _SafetensorsReader:
  """Opens each safetensors file of a checkpoint once and reads tensors by name."""

  def __init__(self, directory: Path):
    index = directory / INDEX_FILE
    if index.is_file():
      weight_map = json.loads(index.read_text())["weight_map"]
    elif (directory / SINGLE_FILE).is_file():
      with safe_open(directory / SINGLE_FILE, framework="numpy") as f:
        weight_map = {name: SINGLE_FILE for name in f.keys()}
    else:
      raise FileNotFoundError(f"{directory}: neither {INDEX_FILE} nor {SINGLE_FILE} found")
    self.directory = directory
    self.weight_map: dict[str, str] = weight_map
    self._handles: dict[str, object] = {}

  def read(self, name: str) -> np.ndarray:
    if name not in self.weight_map:
      raise KeyError(f"{self.directory}: tensor '{name}' is missing from the checkpoint")
    file = self.weight_map[name]
    if file not in self._handles:
      self._handles[file] = safe_open(self.directory / file, framework="numpy")
    return self._handles[file].get_tensor(name)


def _place(host: np.ndarray, variable: nnx.Param, dtype: np.dtype, mesh: Mesh | None) -> jax.Array:
  """Puts a host tensor on devices, each device receiving only its own shard."""
  host = host.astype(dtype, copy=False)
  if mesh is None:
    return jnp.asarray(host)
  sharding = NamedSharding(mesh, variable.get_value().sharding.spec)
  return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def load_hf(path: str | Path, dtype: str = "float32", mesh: Mesh | None = None,
            **config_overrides) -> tuple[Qwen3, ModelConfig]:
  """Imports a transformers Qwen3 checkpoint directory (config.json + safetensors)."""
  directory = Path(path)
  config_file = directory / "config.json"
  if not config_file.is_file():
    raise FileNotFoundError(f"{directory}: no config.json (is this a Hugging Face model directory?)")
  config = from_hf_config(json.loads(config_file.read_text()), param_dtype=dtype, dtype=dtype,
                          **config_overrides)
  reader = _SafetensorsReader(directory)
  model = abstract_model(config.replace(weight_layout="in_out"), mesh=mesh)  # WEIGHT_MAP's layouts
  np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
  used = set()
  for nnx_path, variable in _params(model):
    name, layout = hf_name_for(nnx_path)
    hf_array = reader.read(name)
    shape = tuple(variable.get_value().shape)
    array = to_nnx_layout(hf_array, layout, shape)
    if array.shape != shape:
      raise ConfigError(f"{directory}: tensor '{name}' has shape {hf_array.shape}, which does not"
                        f" fit parameter '{nnx_path}' {shape} of config.json's model")
    variable.set_value(_place(array, variable, np_dtype, mesh))
    used.add(name)
  unused = set(reader.weight_map) - used - ({"lm_head.weight"} if config.tie_word_embeddings else set())
  if unused:
    raise ConfigError(f"{directory}: tensors not used by the Qwen3 model: {sorted(unused)[:5]}")
  return relayout(model, config.weight_layout, mesh), config


def _to_host(array: jax.Array) -> np.ndarray:
  if not array.is_fully_addressable:
    array = multihost_utils.process_allgather(array, tiled=True)
  return np.asarray(jax.device_get(array))


def save_hf(model: Qwen3, config: ModelConfig, path: str | Path, dtype: str | None = None,
            max_shard_bytes: int = 5 * 2**30) -> None:
  """Exports to a Hugging Face directory (config.json, sharded safetensors + index)."""
  dtype = dtype or config.param_dtype
  np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
  directory = Path(path)
  write = jax.process_index() == 0
  if write:
    directory.mkdir(parents=True, exist_ok=True)
  model = relayout(model, "in_out")  # WEIGHT_MAP's layouts
  shard_names: list[list[str]] = []  # tensor names of each written file
  pending: dict[str, np.ndarray] = {}
  total = 0

  def flush():
    if write:
      save_file(pending, str(directory / f"part-{len(shard_names) + 1}.tmp"), metadata={"format": "pt"})
    shard_names.append(list(pending))
    pending.clear()  # host memory is bounded by one shard

  for nnx_path, variable in _params(model):
    name, layout = hf_name_for(nnx_path)
    tensor = np.ascontiguousarray(to_hf_layout(_to_host(variable.get_value()), layout).astype(np_dtype))
    if pending and sum(t.nbytes for t in pending.values()) + tensor.nbytes > max_shard_bytes:
      flush()
    pending[name] = tensor
    total += tensor.nbytes
  flush()
  if not write:
    return
  count = len(shard_names)
  weight_map = {}
  for number, names in enumerate(shard_names, start=1):
    final = SINGLE_FILE if count == 1 else f"model-{number:05d}-of-{count:05d}.safetensors"
    (directory / f"part-{number}.tmp").rename(directory / final)
    weight_map.update(dict.fromkeys(names, final))
  if count > 1:
    index_json = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (directory / INDEX_FILE).write_text(json.dumps(index_json, indent=2) + "\n")
  (directory / "config.json").write_text(json.dumps(to_hf_config(config, dtype), indent=2) + "\n")
