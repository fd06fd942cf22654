"""`toolorch tools list|call`: look at a tool set and try a tool by hand."""

from __future__ import annotations

import argparse
import asyncio
import json

from toolorch_jax.cli.parsers import add_command, add_group, add_overrides
from toolorch_jax.tools.registry import DEFAULT_TOOLSET


def _toolset(args: argparse.Namespace):
  from toolorch_jax.tools.registry import load_toolset

  return load_toolset(args.config, args.set + args.overrides)


def cmd_list(args: argparse.Namespace) -> int:
  """Print each tool of the set: price, concurrency group, description (as the policy sees it) and
  arguments."""
  from toolorch_jax.tools.listing import describe_toolset

  toolset = _toolset(args)
  print(json.dumps(toolset.schemas(), indent=2) if args.schemas else describe_toolset(toolset))
  return 0


def cmd_call(args: argparse.Namespace) -> int:
  """Call tool NAME with --args and print the ToolResult (text, cost_usd, latency_s, error,
  metadata) as JSON; exit status 1 when the result is an error."""
  from toolorch_jax.tools.base import ToolContext

  context = ToolContext(episode_id="cli", timeout_s=args.timeout)
  result = asyncio.run(_toolset(args).call(args.name, args.args, context))
  print(json.dumps(result.to_dict(), indent=2, default=str))
  return 0 if result.ok else 1


def add_parsers(subparsers) -> None:
  actions = add_group(subparsers, "tools", "list the tools of a tool set, or call one by hand")
  listing = add_command(actions, "list", cmd_list, "the tools, their prices and arguments")
  listing.add_argument("--schemas", action="store_true",
                       help="print the OpenAI-style function specs as JSON instead")
  call = add_command(actions, "call", cmd_call, "call one tool and print its ToolResult as JSON")
  call.add_argument("name", help="tool name, as in `toolorch tools list`")
  call.add_argument("--args", default="{}", help="the arguments as a JSON object")
  call.add_argument("--timeout", type=float, default=None, help="deadline for the call in seconds")
  for parser in (listing, call):
    parser.add_argument("--config", default=DEFAULT_TOOLSET,
                        help=f"tool set name in configs/tools/ or a YAML path (default: {DEFAULT_TOOLSET})")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an override, as the KEY=VALUE words after the command (repeatable)")
    add_overrides(parser, "tool set", "tools.python.settings.timeout_s=5")
