"""Tool sets from YAML: which tools, their settings and prices, model aliases, concurrency caps.

    # configs/tools/NAME.yaml
    tools:
      python:                         # the name the policy calls
        type: code_interpreter        # a registered type, or module:attr of your own Tool subclass
        price: {per_second: 8.3e-6}   # per_call, per_second, per_mtok_input, per_mtok_output
        backend: sandbox              # concurrency group (default: the tool's name)
        settings: {timeout_s: 10}     # checked against the type's Settings dataclass
    models:                           # for llm_expert / recorded_expert
      gpt-5: {base_url: ..., api_key_env: OPENAI_API_KEY, price: {per_mtok_input: 1.25, ...}}
    aliases: {answer-1: gpt-5}        # the names the policy picks models by
    backends: {sandbox: {max_concurrency: 2}}
    default_max_concurrency: 8

Every mistake is a ConfigError naming the file and the key.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import jsonschema
from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from toolorch_jax.config import ConfigError, _describe, config_dir, load_config, read_yaml
from toolorch_jax.registry import Registry
from toolorch_jax.tools.base import Limits, Tool, ToolContext, ToolResult
from toolorch_jax.tools.catalog import ModelCatalog, ModelSpec
from toolorch_jax.tools.pricing import Price

DEFAULT_TOOLSET = "local"  # configs/tools/local.yaml: no API key needed
TOOL_TYPES: Registry[type[Tool]] = Registry(
    "tool type", "a Tool subclass", lambda obj: isinstance(obj, type) and issubclass(obj, Tool))
TOOL_TYPES.register("code_interpreter", "toolorch_jax.tools.code_interpreter:CodeInterpreter")
TOOL_TYPES.register("bm25_search", "toolorch_jax.tools.search:BM25Search")
TOOL_TYPES.register("tavily_search", "toolorch_jax.tools.search:TavilySearch")
TOOL_TYPES.register("llm_expert", "toolorch_jax.tools.llm_expert:LLMExpert")
TOOL_TYPES.register("recorded_expert", "toolorch_jax.tools.recorded_expert:RecordedExpert")


def register_tool(type_name: str, target: str | type[Tool]) -> None:
  """Makes `type: type_name` in YAML mean `target` (a Tool subclass or its 'module:attr')."""
  TOOL_TYPES.register(type_name, target)


@dataclasses.dataclass
class ToolSpec:
  type: str = MISSING
  description: str = ""  # "" = the type's own
  backend: str = ""      # concurrency group; "" = the tool's name
  price: Price = dataclasses.field(default_factory=Price)
  settings: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class BackendSpec:
  max_concurrency: int = 8


@dataclasses.dataclass
class ToolSetConfig:
  tools: dict[str, ToolSpec] = dataclasses.field(default_factory=dict)
  models: dict[str, ModelSpec] = dataclasses.field(default_factory=dict)
  aliases: dict[str, str] = dataclasses.field(default_factory=dict)
  backends: dict[str, BackendSpec] = dataclasses.field(default_factory=dict)
  default_max_concurrency: int = 8


class ToolSet(Mapping[str, Tool]):
  """The tools of one config by name, sharing a model catalog and concurrency limits."""

  def __init__(self, tools: Mapping[str, Tool], models: ModelCatalog, limits: Limits):
    self.tools, self.models, self.limits = dict(tools), models, limits

  def __getitem__(self, name: str) -> Tool:
    return self.tools[name]

  def __iter__(self) -> Iterator[str]:
    return iter(self.tools)

  def __len__(self) -> int:
    return len(self.tools)

  async def call(self, name: str, arguments: Any, context: ToolContext | None = None) -> ToolResult:
    """Like `Tool.call`, and an unknown tool name is an error result too."""
    if name not in self.tools:
      return ToolResult(error=f"unknown tool '{name}' (tools: {', '.join(self.tools) or 'none'})")
    return await self.tools[name].call(arguments, context)

  def schemas(self) -> list[dict[str, Any]]:
    """OpenAI-style function specs of all tools, as shown to the policy."""
    return [tool.schema() for tool in self.tools.values()]


def _settings(cls: type[Tool], data: Mapping[str, Any], key: str) -> Any:
  try:
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls.Settings), data))
  except OmegaConfBaseException as err:
    raise ConfigError(_describe(err, key)) from None
  except ConfigError as err:
    raise ConfigError(f"{key}: {err}") from None


def _check_ranges(config: ToolSetConfig, source: str) -> None:
  prices = {f"tools.{n}.price": s.price for n, s in config.tools.items()}
  prices |= {f"models.{n}.price": m.price for n, m in config.models.items()}
  for key, price in prices.items():
    for field in dataclasses.fields(price):
      if getattr(price, field.name) < 0:
        raise ConfigError(f"{source}: {key}.{field.name} must be >= 0,"
                          f" got {getattr(price, field.name)}")
  for name, model in config.models.items():
    if model.latency.first_token_s < 0 or model.latency.output_tokens_per_s <= 0:
      raise ConfigError(f"{source}: models.{name}.latency: need first_token_s >= 0 and"
                        " output_tokens_per_s > 0")
  caps = {f"backends.{n}.max_concurrency": b.max_concurrency for n, b in config.backends.items()}
  for key, cap in (caps | {"default_max_concurrency": config.default_max_concurrency}).items():
    if cap < 1:
      raise ConfigError(f"{source}: {key} must be >= 1, got {cap}")


def build_toolset(config: ToolSetConfig, source: str = "tool set") -> ToolSet:
  """Instantiates every tool of `config`; `source` (the file) prefixes every error."""
  _check_ranges(config, source)
  try:
    models = ModelCatalog.build(config.models, config.aliases)
  except ConfigError as err:
    raise ConfigError(f"{source}: {err}") from None
  limits = Limits({n: b.max_concurrency for n, b in config.backends.items()},
                  config.default_max_concurrency)
  tools = {}
  for name, spec in config.tools.items():
    key = f"{source}: tools.{name}"
    cls = TOOL_TYPES.resolve(spec.type, f"{key}.type")
    settings = _settings(cls, spec.settings, f"{key}.settings")
    try:
      tool = cls(name, settings, price=spec.price, models=models, backend=spec.backend,
                 limits=limits, description=spec.description)
      jsonschema.Draft202012Validator.check_schema(tool.parameters)
    except ConfigError as err:
      raise ConfigError(f"{key}: {err}") from None
    except jsonschema.SchemaError as err:
      raise ConfigError(f"{key}: parameters is not a valid JSON schema: {err.message}") from None
    except Exception as err:  # a user tool's constructor: still say which entry broke
      raise ConfigError(f"{key}: cannot build {spec.type}: {type(err).__name__}: {err}") from None
    tools[name] = tool
  used = {tool.backend for tool in tools.values()} | {m.backend for m in models.models.values()}
  for name in config.backends:
    if name not in used:
      raise ConfigError(f"{source}: backends.{name}: no tool or model uses this backend"
                        f" (in use: {', '.join(sorted(used)) or 'none'})")
  return ToolSet(tools, models, limits)


def toolset_names() -> list[str]:
  return sorted(p.stem for p in (config_dir() / "tools").glob("*.yaml"))


def toolset_path(name_or_path: str) -> Path:
  """A tool set in `configs/tools/` by name, or a YAML file by path."""
  path = config_dir() / "tools" / f"{name_or_path}.yaml"
  if path.is_file():
    return path
  if name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path:
    return Path(name_or_path)
  raise ConfigError(f"unknown tool set '{name_or_path}'; known: {', '.join(toolset_names())}")


def _check_shape(path: Path) -> None:
  """OmegaConf fails with a bare TypeError on a list where a mapping belongs; name the key."""
  raw = read_yaml(path)
  if not OmegaConf.is_dict(raw):
    raise ConfigError(f"{path}: a tool set is a mapping with keys tools, models, aliases, backends")
  for section in ("tools", "models", "aliases", "backends"):
    if section in raw and not OmegaConf.is_dict(raw[section]):
      raise ConfigError(f"{path}: '{section}' must be a mapping of name to entry")
    for name in raw.get(section) or {}:
      if section != "aliases" and not OmegaConf.is_dict(raw[section][name]):
        raise ConfigError(f"{path}: '{section}.{name}' must be a mapping")


def load_toolset(name_or_path: str = DEFAULT_TOOLSET, overrides: Sequence[str] = ()) -> ToolSet:
  """Loads and builds a tool set by name or path, with `key.sub=value` overrides."""
  path = toolset_path(name_or_path)
  _check_shape(path)
  return build_toolset(load_config(ToolSetConfig, path, overrides), str(path))
