"""Tools the orchestrator calls: the `Tool` contract, YAML tool sets, and the built-in tools
(code sandbox, BM25 and Tavily search, OpenAI-compatible and recorded LLM experts)."""

from toolorch_jax.tools.base import Limits, Tool, ToolCall, ToolContext, ToolError, ToolResult
from toolorch_jax.tools.catalog import ModelCatalog, ModelSpec
from toolorch_jax.tools.pricing import LatencyModel, Price
from toolorch_jax.tools.registry import (ToolSet, ToolSetConfig, build_toolset, load_toolset,
                                         register_tool)

__all__ = ["LatencyModel", "Limits", "ModelCatalog", "ModelSpec", "Price", "Tool", "ToolCall",
           "ToolContext", "ToolError", "ToolResult", "ToolSet", "ToolSetConfig", "build_toolset",
           "load_toolset", "register_tool"]
