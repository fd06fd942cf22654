"""Names a YAML config may use for one kind of object: environments, tool types, rewards.

A name maps to the object or to its `module:attr`, imported on first use so that registering costs
nothing; a name that is not registered may itself be a `module:attr` (a user's own object). Every
mistake is a ConfigError naming the config key, what is registered, and what was found instead.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

from toolorch_jax.config import ConfigError, load_object

T = TypeVar("T")


class Registry(Generic[T]):
  """`kind` ("environment", "tool type", ...) and `expected` ("an Environment subclass") word the
  errors; `accepts` says whether a resolved object is of the kind."""

  def __init__(self, kind: str, expected: str, accepts: Callable[[Any], bool]):
    self.kind = kind
    self.expected = expected
    self.accepts = accepts
    self._targets: dict[str, T | str] = {}

  def register(self, name: str, target: T | str | None = None):
    """Registers `target` (the object or its 'module:attr'); without one, a decorator."""
    if target is None:
      def decorate(obj: T) -> T:
        self._targets[name] = obj
        return obj
      return decorate
    self._targets[name] = target
    return target

  def names(self) -> list[str]:
    return sorted(self._targets)

  def resolve(self, name: str, key: str) -> T:
    """The object `name` stands for; `key` is the config key blamed in errors."""
    target = self._targets.get(name, name)
    if isinstance(target, str):
      if ":" not in target:
        raise ConfigError(f"{key}: unknown {self.kind} '{name}' (registered: "
                          f"{', '.join(self.names())}; or give module:attr)")
      target = load_object(target, key)
    if not self.accepts(target):
      raise ConfigError(f"{key}: '{name}' is {target!r}, not {self.expected}")
    return target
