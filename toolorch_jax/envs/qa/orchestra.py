"""ToolOrchestra's QA surface: `search(model)`, `enhance_reasoning(model)`, `answer(model)`.

The policy only picks an expert by alias; the expert does the writing, from the question and the
episode's notes (documents found, code run):

  search             the expert writes a query; the search tool runs it; the passages join the notes
  enhance_reasoning  the expert writes Python; the code interpreter runs it; code and output join
  answer             the expert gives the final answer (graded by the episode; the episode ends)

A step's cost and latency are the sums of its calls (the expert's tokens, then the tool's run);
each call's own account is kept in the result's metadata under `expert` and `run`.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, Mapping

from toolorch_jax.envs.qa.notes import Notes, code_block
from toolorch_jax.envs.qa.replies import final_answer, python_code, strip_think, tagged
from toolorch_jax.envs.qa.surface import FINAL, expert_models, require_tool
from toolorch_jax.tools.base import Tool, ToolContext, ToolResult

MAX_QUERY_CHARS = 390  # ToolOrchestra cuts queries to its retriever at 390 characters
INSTRUCTIONS = (
    "You orchestrate expert models to answer the user's question. Each tool asks the expert model"
    " you choose by its alias (the tool descriptions list their prices):\n"
    "- `search`: the expert writes a search query from the question and the context gathered so"
    " far; the passages found join the context.\n"
    "- `enhance_reasoning`: the expert writes Python code for the problem; it is run, and the code"
    " and its output join the context.\n"
    f"- `{FINAL}`: the expert gives the final answer from the question and the context. This ends"
    " the episode: call it alone.")


def _step_result(calls: Mapping[str, ToolResult], text: str = "", error: str | None = None,
                 **extra) -> ToolResult:
  """A step's result: cost and latency summed over its calls, each call's account in metadata."""
  accounts = {role: {"cost_usd": r.cost_usd, "latency_s": r.latency_s, "error": r.error,
                     **r.metadata} for role, r in calls.items()}
  return ToolResult(text=text, error=error, cost_usd=sum(r.cost_usd for r in calls.values()),
                    latency_s=sum(r.latency_s for r in calls.values()),
                    metadata={**accounts, **extra})


class ExpertStep(Tool):
  """Asks the chosen expert with the step's instruction; `act` uses what it wrote, running it on
  `runner` (the search tool, the code interpreter) where the step has one."""

  instruction: ClassVar[str] = ""

  def __init__(self, name: str, expert: Tool, models: list[str], question: str, notes: Notes,
               runner: Tool | None = None):
    super().__init__(name, description=expert.description)
    self.expert, self.question, self.notes, self.runner = expert, question, notes, runner
    self.parameters = {"type": "object", "properties": {"model": {
        "type": "string", "enum": models, "description": "the alias of the expert model to ask"}},
        "required": ["model"], "additionalProperties": False}

  async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    prompt = self.notes.prompt(self.question, self.instruction)
    asked = await self.expert.call({"model": arguments["model"], "prompt": prompt}, context)
    if asked.error:
      return _step_result({"expert": asked},
                          error=f"expert '{arguments['model']}' failed: {asked.error}")
    return await self.act(asked, context)

  @abc.abstractmethod
  async def act(self, asked: ToolResult, context: ToolContext) -> ToolResult:
    """The step's result from the expert's reply `asked`."""


class SearchStep(ExpertStep):
  instruction = ("Do not answer the question. Write one concise query that searches for the"
                 " missing information, within <query> and </query>.")

  async def act(self, asked: ToolResult, context: ToolContext) -> ToolResult:
    query = (tagged(asked.text, "query") or strip_think(asked.text))[:MAX_QUERY_CHARS].strip()
    if not query:
      return _step_result({"expert": asked}, error="the expert wrote no search query")
    found = await self.runner.call({"query": query}, context)
    calls = {"expert": asked, "run": found}
    if found.error:
      return _step_result(calls, error=f"search for {query!r} failed: {found.error}", query=query)
    self.notes.add_search(query, found.text)
    return _step_result(calls, text=f"Query: {query}\n\n{found.text}", query=query)


class ReasoningStep(ExpertStep):
  instruction = ("Do not answer the question directly. Write self-contained Python code (every"
                 " import and initialisation included) whose printed output gives intermediate"
                 " results, within ```python and ```.")

  async def act(self, asked: ToolResult, context: ToolContext) -> ToolResult:
    code = python_code(asked.text)
    if not code:
      return _step_result({"expert": asked}, error="the expert wrote no ```python block")
    ran = await self.runner.call({"code": code}, context)
    calls = {"expert": asked, "run": ran}
    if ran.error and not ran.text:  # the code never ran, or died without a word
      return _step_result(calls, error=f"the expert's code failed: {ran.error}", code=code)
    output = ran.text + (f"\n[{ran.error}]" if ran.error else "")
    self.notes.add_code(code, output)
    return _step_result(calls, text=code_block(code, output), code=code)


class AnswerStep(ExpertStep):
  instruction = ("Think it through, then give only the exact final answer, without explanation,"
                 " within <answer> and </answer>.")

  async def act(self, asked: ToolResult, context: ToolContext) -> ToolResult:
    prediction = final_answer(asked.text)
    return _step_result({"expert": asked}, text=f"Final answer: {prediction}",
                        prediction=prediction)


class OrchestraSurface:
  """The experts `search`, `enhance_reasoning` and `answer` of a tool set (ToolOrchestra's
  names), the search tool their queries go to and the interpreter their code runs in."""

  instructions = INSTRUCTIONS
  steps = {"search": SearchStep, "enhance_reasoning": ReasoningStep, FINAL: AnswerStep}

  def __init__(self, tools: Mapping[str, Tool], search_tool: str, python_tool: str,
               max_context_chars: int):
    self.experts = {name: require_tool(tools, name, "env.settings.toolset") for name in self.steps}
    self.models = {name: expert_models(tool, f"env.settings.toolset: tools.{name}")
                   for name, tool in self.experts.items()}
    self.runners = {"search": require_tool(tools, search_tool, "env.settings.search_tool"),
                    "enhance_reasoning": require_tool(tools, python_tool,
                                                      "env.settings.python_tool")}
    self.max_context_chars = max_context_chars

  def bind(self, question: str) -> dict[str, Tool]:
    notes = Notes(self.max_context_chars)
    return {name: step(name, self.experts[name], self.models[name], question, notes,
                       self.runners.get(name))
            for name, step in self.steps.items()}

  def choices(self) -> set[str]:
    return set(self.steps).union(*self.models.values())
