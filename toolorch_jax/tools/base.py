"""The tool contract: `Tool`, `ToolCall`, `ToolResult`, `ToolContext`, per-backend concurrency limits.

The episode loop awaits `tool.call(arguments, context)` and always gets a `ToolResult` back: bad
arguments (checked against the tool's JSON schema), exceptions, timeouts and HTTP failures all
arrive as `error`, an observation for the policy and a count for the metrics, never as a raise.
That promise is kept here, once, so a tool's own `run` may simply raise.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import time
import weakref
from typing import Any, AsyncIterator, ClassVar, Mapping, NamedTuple

import jsonschema

from toolorch_jax.tools.catalog import ModelCatalog
from toolorch_jax.tools.pricing import Price

log = logging.getLogger(__name__)


class ToolCall(NamedTuple):
  """One call the policy made: a tool name and its arguments; equals the tuple `(name, arguments)`."""

  name: str
  arguments: dict[str, Any]


@dataclasses.dataclass
class ToolResult:
  """What one call produced: the observation text, its price, its latency, and what went wrong."""

  text: str = ""
  cost_usd: float = 0.0
  latency_s: float = 0.0  # measured wall time unless the tool models it (recorded responses)
  error: str | None = None
  metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

  @property
  def ok(self) -> bool:
    return self.error is None

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ToolContext:
  """What the caller tells a tool about a call; tools know nothing else of the episode."""

  episode_id: str = ""
  timeout_s: float | None = None  # the caller's deadline for this call, on top of the tool's own


class ToolError(Exception):
  """An expected failure a tool reports as `ToolResult.error`, with what it already cost."""

  def __init__(self, message: str, *, cost_usd: float = 0.0, metadata: dict | None = None):
    super().__init__(message)
    self.cost_usd = cost_usd
    self.metadata = metadata or {}


class Limits:
  """At most `cap(backend)` calls in flight per backend (an API endpoint, the code sandbox).

  Semaphores are made per event loop, so one tool set serves `asyncio.run` after `asyncio.run`.
  """

  def __init__(self, caps: Mapping[str, int] | None = None, default: int = 8):
    self.caps = dict(caps or {})
    self.default = default
    self._semaphores: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

  def cap(self, backend: str) -> int:
    return self.caps.get(backend, self.default)

  @contextlib.asynccontextmanager
  async def slot(self, backend: str) -> AsyncIterator[None]:
    per_loop = self._semaphores.setdefault(asyncio.get_running_loop(), {})
    if backend not in per_loop:
      per_loop[backend] = asyncio.Semaphore(self.cap(backend))
    async with per_loop[backend]:
      yield


@dataclasses.dataclass
class NoSettings:
  """Settings of a tool that has none."""


class Tool(abc.ABC):
  """A named, schema-checked, priced async function the policy can call.

  Subclasses set `description` and `parameters` (a JSON schema of the arguments object), optionally
  a `Settings` dataclass (the schema of `settings:` in a tool-set YAML), and implement `run`.
  """

  Settings: ClassVar[type] = NoSettings
  description: str = ""
  parameters: dict[str, Any] = {"type": "object", "properties": {}}

  def __init__(self, name: str, settings: Any = None, *, price: Price | None = None,
               models: ModelCatalog | None = None, backend: str = "",
               limits: Limits | None = None, description: str = ""):
    self.name = name
    self.settings = self.Settings() if settings is None else settings
    self.price = price or Price()
    self.models = models or ModelCatalog()
    self.backend = backend or name
    self.limits = limits or Limits()
    if description:
      self.description = description

  @abc.abstractmethod
  async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    """Does the work on validated arguments; may raise (ToolError for expected failures)."""

  def backend_for(self, arguments: dict[str, Any]) -> str:
    """The concurrency group a call joins; a tool fronting several endpoints picks per call."""
    return self.backend

  def schema(self) -> dict[str, Any]:
    """The OpenAI-style function spec the policy is shown."""
    return {"type": "function", "function": {
        "name": self.name, "description": self.description, "parameters": self.parameters}}

  @functools.cached_property
  def _validator(self) -> jsonschema.protocols.Validator:
    return jsonschema.Draft202012Validator(self.parameters)

  def validate(self, arguments: Any) -> dict[str, Any]:
    """Arguments as a dict (a JSON string is parsed first), or ToolError naming the bad field."""
    if isinstance(arguments, (str, bytes)):
      try:
        arguments = json.loads(arguments)
      except json.JSONDecodeError as err:
        raise ToolError(f"bad arguments for '{self.name}': not valid JSON ({err})") from None
    if not isinstance(arguments, Mapping):
      raise ToolError(f"bad arguments for '{self.name}': expected a JSON object, got"
                      f" {type(arguments).__name__}")
    arguments = dict(arguments)
    error = jsonschema.exceptions.best_match(self._validator.iter_errors(arguments))
    if error is not None:
      where = "/".join(str(part) for part in error.absolute_path)
      raise ToolError(f"bad arguments for '{self.name}': "
                      + (f"'{where}': " if where else "") + error.message)
    return arguments

  async def call(self, arguments: Any, context: ToolContext | None = None) -> ToolResult:
    """Runs the tool; every failure comes back as `ToolResult.error`, nothing is raised."""
    context = context or ToolContext()
    start = time.perf_counter()
    deadline = asyncio.timeout(context.timeout_s)
    try:
      checked = self.validate(arguments)
      async with deadline, self.limits.slot(self.backend_for(checked)):
        result = await self.run(checked, context)
    except ToolError as err:
      result = ToolResult(error=str(err), cost_usd=err.cost_usd, metadata=err.metadata)
    except TimeoutError as err:
      result = ToolResult(error=f"timed out after {context.timeout_s:g} s (caller's deadline)"
                          if deadline.expired() else f"TimeoutError: {err}")
    except Exception as err:  # a tool bug must not end the episode: report it as the observation
      log.exception("tool %s failed", self.name)
      result = ToolResult(error=f"{type(err).__name__}: {err}")
    if not result.latency_s:
      result.latency_s = time.perf_counter() - start
    return result

  __call__ = call
