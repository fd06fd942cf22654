"""A model served until interrupted: the engine and its driver, the OpenAI-compatible HTTP server,
and optionally JetStream's gRPC server, all on one host address (127.0.0.1 by default)."""

from __future__ import annotations

import asyncio

from toolorch_jax.model import Qwen3
from toolorch_jax.serving.client import EngineClient
from toolorch_jax.serving.driver import Driver
from toolorch_jax.serving.engine import Engine
from toolorch_jax.serving.engine_config import EngineConfig
from toolorch_jax.serving.jetstream_compat import start_grpc_server
from toolorch_jax.serving.openai_server import ChatServer
from toolorch_jax.serving.sampling import SamplingParams
from toolorch_jax.tokenizer import Tokenizer


def serve_model(model: Qwen3, tokenizer: Tokenizer, name: str, config: EngineConfig,
                host: str = "127.0.0.1", port: int = 8000, grpc_port: int = 0) -> None:
  """Serves `model` as `name` over HTTP on `port` (and gRPC on `grpc_port` unless 0)."""
  import uvicorn

  driver = Driver(Engine(model, tokenizer, config))
  client = EngineClient(driver)
  grpc_server = None
  try:
    # Compile prefill and decode before the first user waits for them.
    asyncio.run(client.generate([tokenizer.eos_id], 2, SamplingParams(temperature=0)))
    if grpc_port:
      grpc_server = start_grpc_server(driver, grpc_port, host=host)
    print(f"serving {name} on http://{host}:{port}/v1"
          + (f" and gRPC {host}:{grpc_port}" if grpc_port else ""), flush=True)
    uvicorn.run(ChatServer(client, tokenizer, name).app, host=host, port=port, log_level="warning")
  finally:
    if grpc_server is not None:
      grpc_server.stop()  # also stops the driver
    else:
      driver.stop()
