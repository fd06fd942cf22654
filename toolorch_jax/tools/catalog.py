"""The models a tool set can reach, and the aliases the policy names them by.

ToolOrchestra's policy never sees model names: it picks `answer-1` or `reasoner-3`, and a table
maps those to `gpt-5` or `Qwen/Qwen2.5-Coder-32B-Instruct`. Keeping that table in YAML lets one
trained policy be pointed at other models (or at recorded responses) without retraining.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from toolorch_jax.config import ConfigError
from toolorch_jax.tools.pricing import LatencyModel, Price


@dataclasses.dataclass
class ModelSpec:
  """One model: where it is served, its list price and its typical speed."""

  model: str = ""        # name sent to the server (or column of a recorded table); "" = its key
  base_url: str = ""     # OpenAI-compatible root, e.g. http://127.0.0.1:8000/v1; "" = not served
  api_key_env: str = ""  # environment variable holding the API key; "" = no key is sent
  backend: str = ""      # concurrency group; "" = base_url, else the model's key
  price: Price = dataclasses.field(default_factory=Price)
  latency: LatencyModel = dataclasses.field(default_factory=LatencyModel)


@dataclasses.dataclass(frozen=True)
class ModelCatalog:
  """Models by key (with `model` and `backend` filled in) and aliases onto those keys."""

  models: Mapping[str, ModelSpec] = dataclasses.field(default_factory=dict)
  aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)

  @classmethod
  def build(cls, models: Mapping[str, ModelSpec], aliases: Mapping[str, str]) -> "ModelCatalog":
    filled = {key: dataclasses.replace(spec, model=spec.model or key,
                                       backend=spec.backend or spec.base_url or key)
              for key, spec in models.items()}
    for alias, target in aliases.items():
      if target not in filled:
        raise ConfigError(f"aliases.{alias}: unknown model '{target}'"
                          f" (models: {', '.join(sorted(filled)) or 'none'})")
    return cls(filled, dict(aliases))

  def resolve(self, name: str, key: str = "model") -> ModelSpec:
    """The model an alias or model key names; `key` is the config key to blame when unknown."""
    spec = self.models.get(self.aliases.get(name, name))
    if spec is None:
      known = sorted(set(self.aliases) | set(self.models))
      raise ConfigError(f"{key}: unknown model or alias '{name}'"
                        f" (known: {', '.join(known) or 'none'})")
    return spec

  def price_table(self, names: list[str]) -> str:
    """ToolOrchestra shows the policy what each choice costs; so do our tool descriptions."""
    rows = [f"{name} | ${spec.price.per_mtok_input:g} | ${spec.price.per_mtok_output:g}"
            for name, spec in ((name, self.resolve(name)) for name in names)]
    return "\n".join(["Model | price per million input tokens | price per million output tokens",
                      *rows])
