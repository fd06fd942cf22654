"""Moving a model's projections between the two weight layouts (`ModelConfig.weight_layout`).

"in_out" stores each projection [*in, *out] (Tunix, MaxText; the training and checkpoint default),
"out_in" stores it [*out, *in] (transformers). Which one XLA's CPU matmuls run faster in a decode
step depends on the CPU and the rows (bench/README.md, "Weights stored [out, in] for serving"), so
an engine may serve a permuted copy (`EngineConfig.weight_layout`) while the trainer keeps its own.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from toolorch_jax.model.config import WEIGHT_LAYOUTS
from toolorch_jax.model.qwen3 import Qwen3, abstract_model, shard_model

# How many leading axes of each projection's [in, out] form are its inputs (o_proj: heads, head_dim).
INPUT_AXES = {"q_proj": 1, "k_proj": 1, "v_proj": 1, "o_proj": 2, "gate_proj": 1, "up_proj": 1,
              "down_proj": 1, "lm_head": 1}


def _input_axes(path: tuple[Any, ...]) -> int | None:
  names = [str(getattr(key, "key", getattr(key, "name", key))) for key in path]
  return next((INPUT_AXES[name] for name in reversed(names) if name in INPUT_AXES), None)


def _permute(array: jax.Array, input_axes: int, source: str, target: str) -> jax.Array:
  if source == target:
    return array
  split = input_axes if source == "in_out" else array.ndim - input_axes
  return jnp.transpose(array, tuple(range(split, array.ndim)) + tuple(range(split)))


def relayout_state(state: Any, source: str, target: str) -> list[jax.Array]:
  """The leaves of a model state (`nnx.state(model)`) stored in `source`, permuted to `target`,
  in the state's leaf order."""
  for name, layout in (("source", source), ("target", target)):
    if layout not in WEIGHT_LAYOUTS:
      raise ValueError(f"{name} weight layout must be one of {WEIGHT_LAYOUTS}, got '{layout}'")
  leaves = jax.tree_util.tree_flatten_with_path(state)[0]
  return [array if (axes := _input_axes(path)) is None else _permute(array, axes, source, target)
          for path, array in leaves]


def relayout(model: Qwen3, layout: str, mesh: Mesh | None = None) -> Qwen3:
  """`model` with its projections stored in `layout` (itself when they already are): a new model
  over permuted copies, whose parameters carry the target layout's logical axes (and are laid out
  on `mesh` by them when one is given)."""
  if model.config.weight_layout == layout:
    return model
  graphdef, target = nnx.split(abstract_model(model.config.replace(weight_layout=layout)))
  permute = jax.jit(lambda state: relayout_state(state, model.config.weight_layout, layout))
  leaves = permute(nnx.state(model))
  moved = nnx.merge(graphdef, jax.tree.unflatten(jax.tree.structure(target), leaves))
  return moved if mesh is None else shard_model(moved, mesh)
