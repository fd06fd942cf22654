"""`toolorch serve`: a model behind JetStream's gRPC server and an OpenAI-compatible HTTP server."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from toolorch_jax.config import ConfigError


def load_model_and_tokenizer(hf_dir: str | None, checkpoint_dir: str | None,
                             tokenizer_path: str | None = None, dtype: str = "float32"):
  """(model, tokenizer) from a Hugging Face directory or a toolorch checkpoint; the tokenizer
  defaults to the model's directory."""
  from toolorch_jax import checkpoint
  from toolorch_jax.model import load_hf
  from toolorch_jax.tokenizer import load_tokenizer

  if bool(hf_dir) == bool(checkpoint_dir):
    raise ConfigError("give exactly one of a Hugging Face directory or a checkpoint")
  if hf_dir:
    model, _ = load_hf(hf_dir, dtype=dtype)
  else:
    model, _ = checkpoint.load_model(checkpoint_dir, dtype=dtype)
  tokenizer = load_tokenizer(tokenizer_path or hf_dir or checkpoint_dir)
  if tokenizer.vocab_size > model.config.vocab_size:
    raise ConfigError(f"the tokenizer has {tokenizer.vocab_size} ids but the model only"
                      f" {model.config.vocab_size}")
  return model, tokenizer


def cmd_serve(args: argparse.Namespace) -> int:
  import uvicorn

  from toolorch_jax.serving import Driver, Engine, EngineClient, EngineConfig, SamplingParams
  from toolorch_jax.serving.jetstream_compat import start_grpc_server
  from toolorch_jax.serving.openai_server import ChatServer

  model, tokenizer = load_model_and_tokenizer(args.hf_dir, args.checkpoint, args.tokenizer, args.dtype)
  name = args.served_model_name or Path((args.hf_dir or args.checkpoint).rstrip("/")).name
  engine = Engine(model, tokenizer, EngineConfig(max_slots=args.slots,
                                                 max_prefill_length=args.max_prefill_length,
                                                 max_cache_length=args.max_cache_length))
  driver = Driver(engine)
  client = EngineClient(driver)
  grpc_server = None
  try:
    # Compile prefill and decode before the first user waits for them.
    asyncio.run(client.generate([tokenizer.eos_id], 2, SamplingParams(temperature=0)))
    if args.grpc_port:
      grpc_server = start_grpc_server(driver, args.grpc_port, host=args.host)
    server = ChatServer(client, tokenizer, name)
    print(f"serving {name} on http://{args.host}:{args.port}/v1"
          + (f" and gRPC {args.host}:{args.grpc_port}" if args.grpc_port else ""), flush=True)
    uvicorn.run(server.app, host=args.host, port=args.port, log_level="warning")
  finally:
    if grpc_server is not None:
      grpc_server.stop()  # also stops the driver
    else:
      driver.stop()
  return 0


def add_parser(subparsers) -> None:
  serve = subparsers.add_parser(
      "serve", help="serve a model over OpenAI-compatible HTTP and JetStream gRPC",
      description="Load a Hugging Face Qwen3 directory or a toolorch checkpoint and serve it with"
      " the JetStream engine: an OpenAI-compatible HTTP server (/v1/chat/completions, /v1/models,"
      " /health) and optionally JetStream's gRPC server, on 127.0.0.1 unless --host says otherwise."
      " Needs the 'serve' extra.")
  serve.add_argument("--hf-dir", help="Hugging Face model directory (config.json + safetensors)")
  serve.add_argument("--checkpoint", help="toolorch orbax checkpoint directory")
  serve.add_argument("--tokenizer", help="tokenizer path (default: the model directory)")
  serve.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
  serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
  serve.add_argument("--port", type=int, default=8000, help="HTTP port")
  serve.add_argument("--grpc-port", type=int, default=0, help="JetStream gRPC port (0: no gRPC)")
  serve.add_argument("--served-model-name", help="model id reported by /v1/models")
  serve.add_argument("--slots", type=int, default=32, help="sequences decoded together")
  serve.add_argument("--max-prefill-length", type=int, default=1024, help="longest prompt, in tokens")
  serve.add_argument("--max-cache-length", type=int, default=2048,
                     help="prompt + generated tokens per sequence")
  serve.set_defaults(func=cmd_serve)
