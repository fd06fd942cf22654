"""`toolorch tools list|call`: look at a tool set and try a tool by hand."""

from __future__ import annotations

import argparse
import asyncio
import json

from toolorch_jax.tools.base import Limits, Tool, ToolContext
from toolorch_jax.tools.registry import load_toolset

PRICE_UNITS = (("per_call", "call"), ("per_second", "second"),
               ("per_mtok_input", "M input tokens"), ("per_mtok_output", "M output tokens"))


def _picks_model(tool: Tool) -> bool:
  return "model" in tool.parameters.get("properties", {})


def _price(tool: Tool) -> str:
  parts = [f"${getattr(tool.price, field):g} per {unit}" for field, unit in PRICE_UNITS
           if getattr(tool.price, field)]
  if not parts and _picks_model(tool):
    return "priced per model (see the table)"
  return ", ".join(parts) or "free"


def _backend(tool: Tool, limits: Limits) -> str:
  if _picks_model(tool):
    return "concurrency limited per model backend"
  return f"backend {tool.backend}, at most {limits.cap(tool.backend)} at once"


def _arguments(tool: Tool) -> str:
  required = set(tool.parameters.get("required", []))
  return ", ".join(f"{name}{'*' if name in required else ''} ({spec.get('type', 'any')})"
                   for name, spec in tool.parameters.get("properties", {}).items()) or "none"


def cmd_list(args: argparse.Namespace) -> int:
  toolset = load_toolset(args.config, args.overrides)
  if args.schemas:
    print(json.dumps(toolset.schemas(), indent=2))
    return 0
  for name, tool in toolset.items():
    print(f"{name}  [{type(tool).__name__}; {_price(tool)}; {_backend(tool, toolset.limits)}]")
    for line in tool.description.splitlines():
      print(f"    {line}")
    print(f"    arguments (* = required): {_arguments(tool)}")
  return 0


def cmd_call(args: argparse.Namespace) -> int:
  toolset = load_toolset(args.config, args.overrides)
  context = ToolContext(episode_id="cli", timeout_s=args.timeout)
  result = asyncio.run(toolset.call(args.name, args.args, context))
  print(json.dumps(result.to_dict(), indent=2, default=str))
  return 0 if result.ok else 1


def add_parser(subparsers: argparse._SubParsersAction) -> None:
  tools = subparsers.add_parser(
      "tools", help="list the tools of a tool set, or call one by hand",
      description="Inspect the tools a tool-set YAML declares (configs/tools/) and call one with"
      " JSON arguments, the way the policy would.")
  actions = tools.add_subparsers(dest="action", required=True, metavar="ACTION")
  listing = actions.add_parser("list", help="the tools, their prices and arguments",
                               description="Print each tool of the set: price, concurrency group,"
                               " description (as the policy sees it) and arguments.")
  listing.add_argument("--schemas", action="store_true",
                       help="print the OpenAI-style function specs as JSON instead")
  listing.set_defaults(func=cmd_list)
  call = actions.add_parser("call", help="call one tool and print its ToolResult as JSON",
                            description="Call tool NAME with --args and print the ToolResult"
                            " (text, cost_usd, latency_s, error, metadata) as JSON; exit status 1"
                            " when the result is an error.")
  call.add_argument("name", help="tool name, as in `toolorch tools list`")
  call.add_argument("--args", default="{}", help="the arguments as a JSON object")
  call.add_argument("--timeout", type=float, default=None, help="deadline for the call in seconds")
  call.set_defaults(func=cmd_call)
  for parser in (listing, call):
    parser.add_argument("--config", default="local",
                        help="tool set name in configs/tools/ or a YAML path (default: local)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set tools.python.settings.timeout_s=5"
                        " (repeatable)")
