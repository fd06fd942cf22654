"""`toolorch serve`: a model behind JetStream's gRPC server and an OpenAI-compatible HTTP server."""

from __future__ import annotations

import argparse
from pathlib import Path

from toolorch_jax.cli.parsers import add_command, add_job_flags
from toolorch_jax.config import ConfigError
from toolorch_jax.serving.engine_config import SERVED_LAYOUTS, EngineConfig


def cmd_serve(args: argparse.Namespace) -> int:
  """Load a Hugging Face Qwen3 directory or a toolorch checkpoint and serve it with the JetStream
  engine: an OpenAI-compatible HTTP server (/v1/chat/completions, /v1/models, /health) and
  optionally JetStream's gRPC server, on 127.0.0.1 unless --host says otherwise. Needs the 'serve'
  extra."""
  from toolorch_jax.serving.loading import load_model_and_tokenizer
  from toolorch_jax.serving.server import serve_model

  if bool(args.hf_dir) == bool(args.checkpoint):
    raise ConfigError("give exactly one of --hf-dir or --checkpoint")
  source = args.hf_dir or args.checkpoint
  model, tokenizer = load_model_and_tokenizer(source, args.tokenizer, args.dtype)
  config = EngineConfig(max_slots=args.slots, max_prefill_length=args.max_prefill_length,
                        max_cache_length=args.max_cache_length, decode_steps=args.decode_steps,
                        weight_layout=args.weight_layout)
  serve_model(model, tokenizer, args.served_model_name or Path(source.rstrip("/")).name, config,
              host=args.host, port=args.port, grpc_port=args.grpc_port)
  return 0


def add_parsers(subparsers) -> None:
  serve = add_command(subparsers, "serve", cmd_serve,
                      "serve a model over OpenAI-compatible HTTP and JetStream gRPC")
  serve.add_argument("--hf-dir", help="Hugging Face model directory (config.json + safetensors)")
  serve.add_argument("--checkpoint", help="toolorch orbax checkpoint directory")
  serve.add_argument("--tokenizer", help="tokenizer path (default: the model directory)")
  serve.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
  serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
  serve.add_argument("--port", type=int, default=8000, help="HTTP port")
  serve.add_argument("--grpc-port", type=int, default=0, help="JetStream gRPC port (0: no gRPC)")
  serve.add_argument("--served-model-name", help="model id reported by /v1/models")
  serve.add_argument("--slots", type=int, default=EngineConfig.max_slots,
                     help="sequences decoded together")
  serve.add_argument("--max-prefill-length", type=int, default=EngineConfig.max_prefill_length,
                     help="longest prompt, in tokens")
  serve.add_argument("--max-cache-length", type=int, default=EngineConfig.max_cache_length,
                     help="prompt + generated tokens per sequence")
  serve.add_argument("--decode-steps", type=int, default=EngineConfig.decode_steps,
                     help="decode steps per dispatch (also the tokens per streamed chunk, at most)")
  serve.add_argument("--weight-layout", choices=SERVED_LAYOUTS,
                     default=EngineConfig.weight_layout,
                     help="how the served projections are stored (model: as loaded)")
  add_job_flags(serve)
