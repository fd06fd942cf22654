"""The basic QA surface: the policy writes everything itself — `search(query)`, `python(code)`,
`answer(text)`.

`search` and `python` are the tool set's own tools shown under these names (their schemas,
prices and limits unchanged); `answer` records the text to grade and ends the episode.
"""

from __future__ import annotations

from typing import Any, Mapping

from toolorch_jax.envs.qa.surface import FINAL, require_tool
from toolorch_jax.tools.base import Tool, ToolContext, ToolResult

INSTRUCTIONS = (
    "Answer the user's question. `search` finds passages for a query; `python` runs a Python"
    " program and returns what it printed. When you know the answer, call"
    f" `{FINAL}` with only the final answer (a number as just the number), alone in its message:"
    " it ends the episode.")


class AnswerText(Tool):
  description = "Give the final answer. This ends the episode."
  parameters = {"type": "object", "properties": {
      "text": {"type": "string", "description": "the final answer only, without explanation"}},
      "required": ["text"], "additionalProperties": False}

  async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    return ToolResult(text=f"Final answer: {arguments['text']}",
                      metadata={"prediction": arguments["text"]})


class BasicSurface:
  instructions = INSTRUCTIONS

  def __init__(self, tools: Mapping[str, Tool], search_tool: str, python_tool: str):
    self.tools = {"search": require_tool(tools, search_tool, "env.settings.search_tool"),
                  "python": require_tool(tools, python_tool, "env.settings.python_tool"),
                  FINAL: AnswerText(FINAL)}

  def bind(self, question: str) -> dict[str, Tool]:
    return dict(self.tools)  # stateless: the policy carries its own context

  def choices(self) -> set[str]:
    return set(self.tools)
