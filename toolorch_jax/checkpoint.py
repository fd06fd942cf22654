"""Orbax checkpoints of model weights (local paths or gs://).

A model checkpoint is a folder with `model.yaml` (the ModelConfig) and `params/` (an orbax
StandardCheckpointer tree). Restoring builds the abstract model on the target mesh first, so each
device reads only its own shards; a checkpoint written on one mesh restores onto any other.
"""

from __future__ import annotations

import jax
import orbax.checkpoint as ocp
from etils import epath
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from toolorch_jax.config import ConfigError, load_config, to_yaml
from toolorch_jax.model import ModelConfig, Qwen3, abstract_model

CONFIG_FILE = "model.yaml"
PARAMS_DIR = "params"


def is_model_checkpoint(path: str) -> bool:
  return (epath.Path(path) / CONFIG_FILE).exists()


def save_model(model: Qwen3, config: ModelConfig, path: str) -> None:
  """Writes the weights and config; `path` must not exist yet (orbax refuses to overwrite)."""
  directory = epath.Path(path)
  directory.mkdir(parents=True, exist_ok=True)
  checkpointer = ocp.StandardCheckpointer()
  checkpointer.save(directory / PARAMS_DIR, nnx.to_pure_dict(nnx.state(model, nnx.Param)))
  checkpointer.wait_until_finished()
  if jax.process_index() == 0:
    (directory / CONFIG_FILE).write_text(to_yaml(config))


def load_model(path: str, mesh: Mesh | None = None, dtype: str | None = None) -> tuple[Qwen3, ModelConfig]:
  """Restores a model saved by `save_model`, optionally onto a mesh and cast to `dtype`."""
  directory = epath.Path(path)
  if not (directory / CONFIG_FILE).exists():
    raise ConfigError(f"{directory}: not a model checkpoint (no {CONFIG_FILE})")
  config = load_config(ModelConfig, directory / CONFIG_FILE)
  if dtype is not None:  # orbax casts while restoring
    config = config.replace(param_dtype=dtype, dtype=dtype)
  model = abstract_model(config, mesh=mesh)
  state = nnx.state(model, nnx.Param)

  def target(variable):
    value = variable.get_value()
    sharding = (NamedSharding(mesh, value.sharding.spec) if mesh is not None
                else jax.sharding.SingleDeviceSharding(jax.devices()[0]))
    return jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding)

  abstract = nnx.to_pure_dict(jax.tree.map(target, state, is_leaf=lambda x: isinstance(x, nnx.Variable)))
  restored = ocp.StandardCheckpointer().restore(directory / PARAMS_DIR, abstract)
  nnx.replace_by_pure_dict(state, restored)
  nnx.update(model, state)
  return model, config
