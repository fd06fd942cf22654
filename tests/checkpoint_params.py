"""Reading a training checkpoint's parameters back in a test, whatever job wrote them."""

import jax
import numpy as np


def final_params(checkpoints: str, step: int, like: str | None = None) -> dict[str, np.ndarray]:
  """A checkpoint's parameters read in this one process, whatever job wrote them; their shapes
  come from the params metadata of the local checkpoints `like` (default: `checkpoints`)."""
  import orbax.checkpoint as ocp

  from toolorch_jax.checkpoint import TrainCheckpointer, as_path

  device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  meta = ocp.StandardCheckpointer().metadata(as_path(like or checkpoints) / str(step) / "params")
  abstract = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device),
                          meta.item_metadata.tree)
  with TrainCheckpointer(checkpoints) as checkpointer:
    restored = checkpointer.restore(step, abstract_params=abstract)
  return {jax.tree_util.keystr(k): np.asarray(v) for k, v in
          jax.tree_util.tree_flatten_with_path(restored.params)[0]}
