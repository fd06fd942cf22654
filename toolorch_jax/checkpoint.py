"""Orbax checkpoints (local paths or gs://): model weights, and the full state of a training run.

A model checkpoint is a folder with `model.yaml` (the ModelConfig) and `params/` (an orbax
StandardCheckpointer tree). Restoring builds the abstract model on the target mesh first, so each
device reads only its own shards; a checkpoint written on one mesh restores onto any other.
`load_pretrained` takes either such a folder or a Hugging Face directory, whichever it is given.

A training checkpoint (`TrainCheckpointer`) is one orbax CheckpointManager step folder per saved
step: parameters and optimizer state as sharded array trees (each process writes its shards), and
the RNG key, the data iterator state of every process (gathered, each restores its own), the
resolved config and free-form extras as JSON. Saves are asynchronous and old steps are
pruned to the newest `keep`, so a run resumes from the latest step with everything it needs.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from etils import epath
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

from toolorch_jax.config import ConfigError, load_config, to_yaml
from toolorch_jax.distributed import allgather_objects
from toolorch_jax.model import ModelConfig, Qwen3, abstract_model, load_hf

CONFIG_FILE = "model.yaml"
PARAMS_DIR = "params"


def as_path(path: str) -> epath.Path:
  """`path` as an epath: local paths made absolute (orbax refuses relative ones); gs:// goes
  through gcsfs (or TensorFlow), so a missing one is named here instead of deep inside a save."""
  if not str(path).startswith("gs://"):
    return epath.Path(os.path.abspath(path))
  if not any(importlib.util.find_spec(name) for name in ("gcsfs", "tensorflow")):
    raise ImportError(f"{path}: gs:// paths need gcsfs; install it with the 'gcs' extra"
                      " (pip install 'toolorch_jax[gcs]')")
  return epath.Path(path)


def abstract_like(tree: Any, mesh: Mesh | None = None) -> Any:
  """ShapeDtypeStructs of `tree` to restore into.

  With a mesh, each leaf gets its PartitionSpec on that mesh (replicated where it has none), so a
  run can resume on another mesh of compatible shape. For a mesh whose axes no longer divide the
  weights, take the specs from the model's rules: `abstract_like(nnx.state(abstract_model(config,
  mesh=m)), m)`. Without a mesh, each leaf keeps its own sharding (the first device where it has
  none).
  """
  def leaf(x):
    sharding = getattr(x, "sharding", None)
    if mesh is not None:
      sharding = NamedSharding(mesh, getattr(sharding, "spec", PartitionSpec()))
    sharding = sharding or SingleDeviceSharding(jax.devices()[0])
    return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)

  return jax.tree.map(leaf, tree)


def is_model_checkpoint(path: str) -> bool:
  return (as_path(path) / CONFIG_FILE).exists()


def save_model(model: Qwen3, config: ModelConfig, path: str) -> None:
  """Writes the weights and config; `path` must not exist yet (orbax refuses to overwrite)."""
  directory = as_path(path)
  directory.mkdir(parents=True, exist_ok=True)
  checkpointer = ocp.StandardCheckpointer()
  checkpointer.save(directory / PARAMS_DIR, nnx.to_pure_dict(nnx.state(model, nnx.Param)))
  checkpointer.wait_until_finished()
  if jax.process_index() == 0:
    (directory / CONFIG_FILE).write_text(to_yaml(config))


def load_model(path: str, mesh: Mesh | None = None, dtype: str | None = None) -> tuple[Qwen3, ModelConfig]:
  """Restores a model saved by `save_model`, optionally onto a mesh and cast to `dtype`."""
  directory = as_path(path)
  if not (directory / CONFIG_FILE).exists():
    raise ConfigError(f"{directory}: not a model checkpoint (no {CONFIG_FILE})")
  config = load_config(ModelConfig, directory / CONFIG_FILE)
  if dtype is not None:  # orbax casts while restoring
    config = config.replace(param_dtype=dtype, dtype=dtype)
  model = abstract_model(config, mesh=mesh)
  state = nnx.state(model, nnx.Param)
  abstract = abstract_like(nnx.to_pure_dict(state), mesh)
  restored = ocp.StandardCheckpointer().restore(directory / PARAMS_DIR, abstract)
  nnx.replace_by_pure_dict(state, restored)
  nnx.update(model, state)
  return model, config


def weights_format(path: str) -> str:
  """"orbax" for a toolorch model checkpoint, "hf" for a Hugging Face directory."""
  if is_model_checkpoint(path):
    return "orbax"
  if (as_path(path) / "config.json").exists():
    return "hf"
  raise ConfigError(f"{path}: neither a Hugging Face directory (config.json) nor a toolorch"
                    f" checkpoint ({CONFIG_FILE})")


def load_pretrained(path: str, mesh: Mesh | None = None,
                    dtype: str | None = None) -> tuple[Qwen3, ModelConfig]:
  """Weights from whatever `path` holds: a toolorch checkpoint or a Hugging Face directory."""
  if weights_format(path) == "orbax":
    return load_model(path, mesh=mesh, dtype=dtype)
  return load_hf(path, dtype=dtype or "float32", mesh=mesh)


def _rng_to_json(rng: jax.Array) -> dict[str, Any]:
  """A typed or raw PRNG key as exact integers (orbax has no handler for typed keys)."""
  typed = jax.dtypes.issubdtype(rng.dtype, jax.dtypes.prng_key)
  data = np.asarray(jax.random.key_data(rng) if typed else rng)
  return {"impl": str(jax.random.key_impl(rng)) if typed else None, "dtype": str(data.dtype),
          "shape": list(data.shape), "data": data.ravel().tolist()}


def _rng_from_json(saved: dict[str, Any]) -> jax.Array:
  data = np.asarray(saved["data"], dtype=saved["dtype"]).reshape(saved["shape"])
  return jax.random.wrap_key_data(data, impl=saved["impl"]) if saved["impl"] else jnp.asarray(data)


class Restored(NamedTuple):
  """What `TrainCheckpointer.restore` returns; a tuple, so `step, params, ... = restored` works."""

  step: int
  params: Any
  opt_state: Any
  rng: jax.Array
  data_state: dict[str, Any] | None  # this process's; None when another number of processes wrote it
  config_yaml: str
  extra: dict[str, Any]


class TrainCheckpointer:
  """Training-state checkpoints under `directory` (local or gs://): async saves, newest `keep` kept.

  `save_every` lets orbax skip steps that are not a multiple of it (unless `force`; orbax always
  saves into an empty directory, and at a preemption), so the trainer may call `save` every step.
  """

  def __init__(self, directory: str, keep: int = 3, async_save: bool = True, save_every: int = 1):
    if keep < 1 or save_every < 1:
      raise ValueError(f"checkpoints: keep ({keep}) and save_every ({save_every}) must be >= 1")
    self.directory = as_path(directory)
    self._manager = ocp.CheckpointManager(self.directory, options=ocp.CheckpointManagerOptions(
        max_to_keep=keep, save_interval_steps=save_every, enable_async_checkpointing=async_save,
        create=True))

  def all_steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(self, step: int, params: Any, opt_state: Any, rng: jax.Array, data_state: dict[str, Any],
           config_yaml: str, extra: dict[str, Any] | None = None, force: bool = False) -> bool:
    """Starts saving `step` (arrays are copied off the devices before this returns, so the caller
    may donate them); False when skipped by `save_every` or already saved. Every process of a job
    calls it, with its own `data_state`."""
    if step in self._manager.all_steps():
      return False
    per_process = {"processes": allgather_objects(data_state)}  # orbax writes JSON from process 0
    items = {"rng": ocp.args.JsonSave(_rng_to_json(rng)), "data_state": ocp.args.JsonSave(per_process),
             "config": ocp.args.JsonSave({"yaml": config_yaml}), "extra": ocp.args.JsonSave(extra or {})}
    for name, tree in (("params", params), ("opt_state", opt_state)):
      if jax.tree.leaves(tree):  # orbax refuses trees without arrays, e.g. optax's EmptyState
        items[name] = ocp.args.StandardSave(tree)
    return self._manager.save(step, force=force, args=ocp.args.Composite(**items))

  def restore(self, step: int | None = None, abstract_params: Any = None,
              abstract_opt_state: Any = None) -> Restored:
    """Restores `step` (None: the latest) onto the shapes, dtypes and shardings of the abstract
    trees (see `abstract_like`); a tree whose abstract is None is not read and comes back None,
    one without arrays comes back as given."""
    steps = self.all_steps()
    if step is None and not steps:
      raise FileNotFoundError(f"{self.directory}: no training checkpoint to restore")
    step = steps[-1] if step is None else step
    if step not in steps:
      raise FileNotFoundError(f"{self.directory}: no checkpoint for step {step} (saved steps: {steps})")
    items = {"rng": ocp.args.JsonRestore(), "data_state": ocp.args.JsonRestore(),
             "config": ocp.args.JsonRestore(), "extra": ocp.args.JsonRestore()}
    trees = {"params": abstract_params, "opt_state": abstract_opt_state}
    for name, abstract in trees.items():
      if jax.tree.leaves(abstract):
        items[name] = ocp.args.StandardRestore(abstract)
    restored = self._manager.restore(step, args=ocp.args.Composite(**items))
    params, opt_state = (restored[name] if name in items else tree for name, tree in trees.items())
    saved = restored["data_state"]
    # checkpoints written before data states were kept per process hold one, unwrapped
    states = saved["processes"] if "processes" in saved else [saved]
    data_state = states[jax.process_index()] if len(states) == jax.process_count() else None
    return Restored(step, params, opt_state, _rng_from_json(restored["rng"]), data_state,
                    restored["config"]["yaml"], restored["extra"])

  def wait(self) -> None:
    """Blocks until the pending asynchronous save is on disk."""
    self._manager.wait_until_finished()

  def close(self) -> None:
    self._manager.close()

  def __enter__(self) -> "TrainCheckpointer":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
