"""Serving through JetStream: engine, driver, in-process client, gRPC and OpenAI-compatible servers.

Most names below need the `serve` extra (JetStream); they load on first use, so that importing the
package (or reading `EngineConfig`) works without it.
"""

import importlib

_EXPORTS = {
    "Driver": "driver", "Engine": "engine", "EngineConfig": "engine_config", "EngineClient": "client",
    "Generation": "client", "RequestError": "client", "SamplingParams": "sampling",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
  if name not in _EXPORTS:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
