"""A model to serve and its tokenizer, from a Hugging Face directory or a toolorch checkpoint."""

from __future__ import annotations

from toolorch_jax import checkpoint
from toolorch_jax.config import ConfigError
from toolorch_jax.model import Qwen3
from toolorch_jax.tokenizer import Tokenizer, load_tokenizer


def load_model_and_tokenizer(path: str, tokenizer_path: str | None = None,
                             dtype: str = "float32") -> tuple[Qwen3, Tokenizer]:
  """The weights `path` holds (either format) and the tokenizer (default: beside the weights)."""
  model, _ = checkpoint.load_pretrained(path, dtype=dtype)
  tokenizer = load_tokenizer(tokenizer_path or path)
  if tokenizer.vocab_size > model.config.vocab_size:
    raise ConfigError(f"the tokenizer has {tokenizer.vocab_size} ids but the model only"
                      f" {model.config.vocab_size}")
  return model, tokenizer
