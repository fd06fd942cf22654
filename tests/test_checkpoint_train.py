"""Training checkpoints: bit-exact resume onto another mesh, keep-N, async saves, errors, gs://."""

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding

from toolorch_jax.checkpoint import TrainCheckpointer, abstract_like
from toolorch_jax.model import MeshConfig, abstract_model, create_model, load_model_config, make_mesh

pytestmark = pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 (fake) devices")

CONFIG_YAML = "model:\n  preset: tiny\ntrain:\n  steps: 3\n"


@functools.cache
def train_state(dtype: str):
  """Tiny model parameters (as the trainer holds them) on fsdp=4 x tensor=2 and an AdamW state
  after one update."""
  mesh = make_mesh(MeshConfig(fsdp=4, tensor=2))
  config = load_model_config("tiny", [f"param_dtype={dtype}", f"dtype={dtype}"])
  _, params = nnx.split(create_model(config, mesh=mesh, seed=1))
  tx = optax.adamw(1e-2)
  opt_state = tx.init(params)  # moments sharded like the parameters, as in the trainer
  shardings = jax.tree.map(lambda x: x.sharding, abstract_like(opt_state, mesh))

  @functools.partial(jax.jit, out_shardings=shardings)
  def update(params, opt_state):
    grads = jax.tree.map(lambda p: jnp.full_like(p, 0.5), params)
    return tx.update(grads, opt_state, params)[1]

  return config, params, update(params, opt_state)


def host_copy(tree):
  return jax.tree.map(lambda x: np.array(x, copy=True), tree)


def assert_bit_exact(actual, expected):
  actual_leaves, actual_def = jax.tree.flatten(actual)
  expected_leaves, expected_def = jax.tree.flatten(expected)
  assert actual_def == expected_def
  for a, e in zip(actual_leaves, expected_leaves):
    a, e = np.asarray(a), np.asarray(e)
    assert (a.dtype, a.shape) == (e.dtype, e.shape)
    assert a.reshape(-1).view(np.uint8).tobytes() == e.reshape(-1).view(np.uint8).tobytes()


@pytest.mark.parametrize("dtype,typed_key", [("float32", False), ("bfloat16", True)])
def test_roundtrip_is_bit_exact_onto_another_mesh(tmp_path, dtype, typed_key):
  _, params, opt_state = train_state(dtype)
  rng = jax.random.key(7, impl="rbg") if typed_key else jax.random.PRNGKey(7)
  rng, _ = jax.random.split(rng)
  data_state = {"grain": {"next_index": 5}, "seed": 3}
  with TrainCheckpointer(str(tmp_path / "ckpt")) as checkpointer:
    assert checkpointer.save(3, params, opt_state, rng, data_state, CONFIG_YAML, {"policy_version": 3})
    checkpointer.wait()

  other = make_mesh(MeshConfig(data=2, fsdp=2, tensor=2))
  with TrainCheckpointer(str(tmp_path / "ckpt")) as checkpointer:
    restored = checkpointer.restore(None, abstract_like(params, other), abstract_like(opt_state, other))
  assert restored.step == 3
  assert_bit_exact(restored.params, params)
  assert_bit_exact(restored.opt_state, opt_state)
  assert jax.tree.leaves(restored.params)[0].dtype == jnp.dtype(dtype)
  for got, saved in zip(jax.tree.leaves(restored.params), jax.tree.leaves(params)):
    assert got.sharding == NamedSharding(other, saved.sharding.spec)
  if typed_key:
    assert jax.random.key_impl(restored.rng) == jax.random.key_impl(rng)
    assert_bit_exact(jax.random.key_data(restored.rng), jax.random.key_data(rng))
  else:
    assert_bit_exact(restored.rng, rng)
  assert (restored.data_state, restored.config_yaml, restored.extra) == (
      data_state, CONFIG_YAML, {"policy_version": 3})


def test_params_restore_onto_a_differently_shaped_mesh(tmp_path):
  """Resuming on fsdp=8 from fsdp=4 x tensor=2: the target comes from `abstract_model` on the new
  mesh (its rules keep every weight divisible); the optimizer state may be left unread."""
  config, params, opt_state = train_state("float32")
  with TrainCheckpointer(str(tmp_path)) as checkpointer:
    checkpointer.save(1, params, opt_state, jax.random.key(0), {}, CONFIG_YAML)
    checkpointer.wait()
    fsdp8 = make_mesh(MeshConfig(fsdp=8))
    _, target = nnx.split(abstract_model(config, mesh=fsdp8))
    restored = checkpointer.restore(1, abstract_like(target, fsdp8))
  assert restored.opt_state is None
  assert_bit_exact(restored.params, params)
  embedding = restored.params["embedding"].get_value()
  assert embedding.sharding.mesh == fsdp8
  assert embedding.sharding.spec == target["embedding"].get_value().sharding.spec


def small_state(step: int):
  return {"w": jnp.full((4, 3), step, jnp.bfloat16), "b": jnp.arange(3.0) + step}


def test_keep_n_latest_step_and_save_every(tmp_path):
  with TrainCheckpointer(str(tmp_path / "a"), keep=2) as checkpointer:
    assert checkpointer.latest_step() is None
    for step in range(1, 5):
      assert checkpointer.save(step, small_state(step), {}, jax.random.key(step), {"next": step}, "")
    checkpointer.wait()
    assert checkpointer.all_steps() == [3, 4]
    assert checkpointer.latest_step() == 4
    assert not checkpointer.save(4, small_state(4), {}, jax.random.key(4), {}, "")  # already saved
  assert sorted(os.listdir(tmp_path / "a")) == ["3", "4"]
  with TrainCheckpointer(str(tmp_path / "a")) as checkpointer:
    restored = checkpointer.restore(None, abstract_like(small_state(0)))
  assert (restored.step, restored.data_state) == (4, {"next": 4})
  assert_bit_exact(restored.params, small_state(4))

  with TrainCheckpointer(str(tmp_path / "b"), save_every=2) as checkpointer:
    saved = [checkpointer.save(step, small_state(step), {}, jax.random.key(0), {}, "")
             for step in (1, 2, 3)]
    assert saved == [True, True, False]  # the first save into an empty directory always happens
    assert checkpointer.save(5, small_state(5), {}, jax.random.key(0), {}, "", force=True)
    checkpointer.wait()
    assert checkpointer.all_steps() == [1, 2, 5]


def test_async_save_survives_donated_buffers(tmp_path):
  """The trainer donates its buffers to the next update right after `save` returns."""
  state = small_state(9)
  expected = host_copy(state)
  with TrainCheckpointer(str(tmp_path), async_save=True) as checkpointer:
    checkpointer.save(9, state, {}, jax.random.key(0), {}, "")
    for leaf in jax.tree.leaves(state):
      leaf.delete()
    checkpointer.wait()
    restored = checkpointer.restore(9, abstract_like(small_state(0)))
  assert_bit_exact(restored.params, expected)


def test_restore_errors_name_the_directory_and_steps(tmp_path):
  with TrainCheckpointer(str(tmp_path / "missing")) as checkpointer:
    with pytest.raises(FileNotFoundError, match=r"missing: no training checkpoint to restore"):
      checkpointer.restore()
    checkpointer.save(1, small_state(1), {}, jax.random.key(0), {}, "")
    checkpointer.wait()
    with pytest.raises(FileNotFoundError, match=r"no checkpoint for step 7 \(saved steps: \[1\]\)"):
      checkpointer.restore(7, abstract_like(small_state(0)))
  with pytest.raises(ValueError, match="keep"):
    TrainCheckpointer(str(tmp_path / "x"), keep=0)


def test_gcs_roundtrip(gcs_emulator):
  mesh = make_mesh(MeshConfig(fsdp=4, tensor=2))
  spec = {"w": jax.sharding.PartitionSpec("fsdp"), "b": jax.sharding.PartitionSpec()}
  params = jax.device_put(small_state(2), jax.tree.map(lambda s: NamedSharding(mesh, s), spec))
  rng = jax.random.key(5)
  with TrainCheckpointer(f"{gcs_emulator}/run", keep=1) as checkpointer:
    checkpointer.save(1, small_state(1), {}, rng, {}, "")
    checkpointer.save(2, params, {"count": jnp.int32(2)}, rng, {"next": 2}, CONFIG_YAML, {"v": 2})
    checkpointer.wait()
    assert checkpointer.all_steps() == [2]
  with TrainCheckpointer(f"{gcs_emulator}/run") as checkpointer:
    restored = checkpointer.restore(None, abstract_like(params), abstract_like({"count": jnp.int32(0)}))
  assert restored.step == 2
  assert_bit_exact(restored.params, params)
  assert restored.params["w"].sharding == params["w"].sharding
  assert int(restored.opt_state["count"]) == 2
  assert_bit_exact(jax.random.key_data(restored.rng), jax.random.key_data(rng))
  assert (restored.data_state, restored.config_yaml, restored.extra) == ({"next": 2}, CONFIG_YAML, {"v": 2})


def test_gcs_without_gcsfs_names_the_extra(monkeypatch):
  monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
  with pytest.raises(ImportError, match=r"gs://b/run: gs:// paths need gcsfs.*toolorch_jax\[gcs\]"):
    TrainCheckpointer("gs://b/run")


def test_relative_directories_work(tmp_path, monkeypatch):
  """`toolorch train --workdir runs/x` gives relative paths; orbax itself only takes absolute ones."""
  monkeypatch.chdir(tmp_path)
  checkpointer = TrainCheckpointer("runs/x/checkpoints", async_save=False)
  checkpointer.save(1, {"w": jnp.ones(3)}, {"m": jnp.zeros(3)}, jax.random.key(1), {"k": 1}, "cfg")
  restored = checkpointer.restore()
  assert restored.step == 1 and restored.data_state == {"k": 1}
  assert (tmp_path / "runs" / "x" / "checkpoints" / "1").is_dir()
