"""Serving through JetStream: engine, driver, in-process client, gRPC and OpenAI-compatible servers.

The names below need the `serve` extra (JetStream); they load on first use so that the `toolorch`
command, which registers `serve` from this package, works without it.
"""

import importlib

_EXPORTS = {
    "Driver": "driver", "Engine": "engine", "EngineConfig": "engine", "EngineClient": "client",
    "Generation": "client", "RequestError": "client", "SamplingParams": "sampling",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
  if name not in _EXPORTS:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
