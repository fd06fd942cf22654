"""Config loading: YAML + overrides onto typed schemas, with errors that name the key."""

import pytest

from toolorch_jax.config import ConfigError, load_config
from toolorch_jax.model import ModelConfig, load_model_config, preset_names
from toolorch_jax.model.sharding import MeshConfig


def write(tmp_path, text):
  path = tmp_path / "model.yaml"
  path.write_text(text)
  return path


def test_yaml_and_overrides_are_applied(tmp_path):
  path = write(tmp_path, "num_layers: 3\nhidden_size: 128\n")
  config = load_config(ModelConfig, path, ["num_heads=4", "num_kv_heads=2", "dtype=bfloat16"])
  assert (config.num_layers, config.hidden_size, config.num_heads, config.dtype) == (3, 128, 4, "bfloat16")


def test_unknown_key_in_file_names_key_and_file(tmp_path):
  path = write(tmp_path, "num_layer: 3\n")
  with pytest.raises(ConfigError, match=r"model.yaml: unknown key 'num_layer'"):
    load_config(ModelConfig, path)


def test_unknown_key_in_override_names_key():
  with pytest.raises(ConfigError, match=r"override 'hiden_size=8': unknown key 'hiden_size'"):
    load_config(ModelConfig, None, ["hiden_size=8"])


def test_wrong_type_names_key(tmp_path):
  path = write(tmp_path, "num_layers: many\n")
  with pytest.raises(ConfigError, match=r"bad value for key 'num_layers'.*'many'"):
    load_config(ModelConfig, path)
  with pytest.raises(ConfigError, match=r"bad value for key 'tie_word_embeddings'"):
    load_config(ModelConfig, None, ["tie_word_embeddings=maybe"])


def test_list_where_a_mapping_belongs_names_the_key(tmp_path):
  from toolorch_jax.envs.registry import EnvConfig
  path = write(tmp_path, "name: tau2\nsettings: [1, 2]\n")
  with pytest.raises(ConfigError, match=r"model.yaml: key 'settings' must be a mapping"):
    load_config(EnvConfig, path)
  with pytest.raises(ConfigError, match=r"model.yaml: the top level must be a mapping"):
    load_config(EnvConfig, write(tmp_path, "- 1\n- 2\n"))


def test_missing_file_is_reported(tmp_path):
  with pytest.raises(ConfigError, match=r"config file not found: .*nope.yaml"):
    load_config(ModelConfig, tmp_path / "nope.yaml")


def test_broken_yaml_and_bad_override_syntax(tmp_path):
  with pytest.raises(ConfigError, match="not valid YAML"):
    load_config(ModelConfig, write(tmp_path, "num_layers: [1,\n"))
  with pytest.raises(ConfigError, match="not of the form key.sub=value"):
    load_config(ModelConfig, None, ["num_layers"])


def test_semantic_validation_names_field():
  with pytest.raises(ConfigError, match=r"model.num_heads \(6\) must be a multiple of model.num_kv_heads"):
    load_config(ModelConfig, None, ["num_heads=6", "num_kv_heads=4"])
  with pytest.raises(ConfigError, match=r"model.dtype must be one of"):
    load_config(ModelConfig, None, ["dtype=float16"])


def test_presets_load_and_8b_matches_the_published_shape():
  assert {"qwen3-8b", "qwen3-0.6b", "qwen3-1.7b", "tiny", "small"} <= set(preset_names())
  for name in preset_names():
    load_model_config(name)
  c = load_model_config("qwen3-8b")
  assert (c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim,
          c.intermediate_size, c.vocab_size, c.rope_theta, c.rms_norm_eps,
          c.tie_word_embeddings) == (36, 4096, 32, 8, 128, 12288, 151936, 1e6, 1e-6, False)
  assert 8.1e9 < c.num_params < 8.3e9  # Qwen3-8B: 8.2B parameters
  with pytest.raises(ConfigError, match="unknown model preset 'qwen9'"):
    load_model_config("qwen9")


def test_mesh_parsing_and_sizes():
  assert MeshConfig.parse("fsdp=4,tensor=2").shape(8) == (1, 4, 2)
  assert MeshConfig(data=2, fsdp=-1, tensor=2).shape(8) == (2, 2, 2)
  with pytest.raises(ConfigError, match="'pipeline=2' is not axis=size"):
    MeshConfig.parse("pipeline=2")
  with pytest.raises(ConfigError, match="8 devices are in use"):
    MeshConfig.parse("fsdp=4").shape(8)
