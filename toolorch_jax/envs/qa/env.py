"""Question answering (FRAMES, GSM8K, any jsonl of questions and answers) as an environment.

The system prompt says how to use the surface's tools and states the task's user preference; the
user turn is the question. The episode ends with the first well-formed `answer` call (calls beside
it are not run); that answer is graded right away, so an LLM judge can be asked asynchronously,
and `score` returns the grade. Any other ending scores 0.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from toolorch_jax.config import ConfigError
from toolorch_jax.data.split import in_split
from toolorch_jax.data.task import Preference, Task
from toolorch_jax.data.task_file import read_task_file
from toolorch_jax.envs.base import Ability, Environment, Episode, Script
from toolorch_jax.envs.profiles import PreferenceDraw, ProfileConfig
from toolorch_jax.envs.qa.basic import BasicSurface
from toolorch_jax.envs.qa.data import SPLITS, dataset_file
from toolorch_jax.envs.qa.graders import (GRADERS, ExactMatch, Grade, Grader, LLMJudge,
                                          NumericMatch)
from toolorch_jax.envs.qa.orchestra import OrchestraSurface
from toolorch_jax.envs.qa.surface import FINAL, Surface, expert_models, require_tool
from toolorch_jax.tools import ToolSet, load_toolset
from toolorch_jax.tools.base import Tool, ToolCall, ToolContext, ToolError, ToolResult

SURFACES = ("orchestra", "basic")


@dataclasses.dataclass
class Settings:
  dataset: str = "frames"  # frames | gsm8k | a .jsonl file (absolute, or in the data directory)
  # Field names; None = the dataset's (a file: id, question, answer); id "" = <name>-<index>.
  id_field: str | None = None
  question_field: str | None = None
  answer_field: str | None = None
  answer_marker: str | None = None  # gold = text after the last marker (gsm8k: "####")
  split: str = "test"  # the default split: train | test | all
  test_fraction: float = 0.2  # of tasks, by a hash of their id
  limit: int = 0  # the first N tasks of a split; 0 = all
  surface: str = "orchestra"  # orchestra: search/enhance_reasoning/answer(model); basic
  toolset: str = "toolorchestra"  # a tool set in configs/tools/, or a YAML path
  search_tool: str = "local_search"  # runs queries: a bm25_search or tavily_search tool
  python_tool: str = "python"  # runs code: a code_interpreter tool
  grader: str = "exact"  # exact | numeric | judge
  judge_tool: str = "answer"  # the expert tool asked by the judge grader
  judge_model: str = "answer-1"
  max_context_chars: int = 24000  # of gathered context in an orchestra expert's prompt
  profiles: list[ProfileConfig] = dataclasses.field(default_factory=list)


def _check(s: Settings) -> None:
  for key, value, allowed in (("surface", s.surface, SURFACES), ("grader", s.grader, GRADERS),
                              ("split", s.split, SPLITS)):
    if value not in allowed:
      raise ConfigError(f"env.settings.{key}: unknown {key} '{value}'; one of {', '.join(allowed)}")
  if not 0.0 <= s.test_fraction <= 1.0:
    raise ConfigError(f"env.settings.test_fraction: must be in [0, 1], got {s.test_fraction:g}")
  for key in ("limit", "max_context_chars"):
    if getattr(s, key) < 0:
      raise ConfigError(f"env.settings.{key}: must be >= 0, got {getattr(s, key)}")


class QAEpisode(Episode):
  def __init__(self, task: Task, system_prompt: str, tools: Mapping[str, Tool], grader: Grader):
    super().__init__(task)
    self.system_prompt = system_prompt
    self.tools = dict(tools)
    self.grader = grader
    self.final_call: ToolCall | None = None
    self.grade: Grade | None = None  # set once the final answer is graded

  def messages(self) -> list[dict[str, Any]]:
    return [{"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.task.prompt}]

  def tool_schemas(self) -> list[dict[str, Any]]:
    schemas = []
    for name, tool in self.tools.items():
      schema = tool.schema()
      schemas.append({**schema, "function": {**schema["function"], "name": name}})
    return schemas

  def _claim_final(self, call: ToolCall) -> None:
    """The first well-formed `answer` call ends the episode (a malformed one is only an error)."""
    if self.done or call.name != FINAL:
      return
    try:
      self.tools[FINAL].validate(call.arguments)
    except ToolError:
      return
    self.final_call, self.done = call, True

  def observe(self, content: str, tool_calls: Sequence[ToolCall]) -> None:
    for call in tool_calls:
      self._claim_final(call)

  async def execute(self, call: ToolCall, context: ToolContext) -> ToolResult:
    self._claim_final(call)
    if self.done and call is not self.final_call:
      return ToolResult(error=f"not run: '{FINAL}' ended the episode")
    tool = self.tools.get(call.name)
    if tool is None:
      return ToolResult(error=f"unknown tool {call.name!r}; available: {sorted(self.tools)}")
    result = await tool.call(call.arguments, context)
    if call is self.final_call:
      self.grade = await self._grade(result, context)
      result.metadata["grade"] = dataclasses.asdict(self.grade)
    return result

  async def _grade(self, result: ToolResult, context: ToolContext) -> Grade:
    if result.error or "prediction" not in result.metadata:
      return Grade(0.0, f"no answer: {result.error or 'the answer tool gave none'}")
    return await self.grader.grade(self.task.prompt, result.metadata["prediction"],
                                   str(self.task.answer), context)

  def score(self) -> float:
    return self.grade.score if self.grade else 0.0


class QAEnvironment(Environment):
  """QA tasks from the data directory on the ToolOrchestra or the basic tool surface.

  `tools` replaces the tool set named in the settings (tests, or a set built in code).
  """

  name = "qa"
  Settings = Settings

  def __init__(self, settings: Settings | None = None, tools: ToolSet | None = None):
    s = self.settings = settings or Settings()
    _check(s)
    self.tools = tools if tools is not None else load_toolset(s.toolset)
    self.surface: Surface = (
        OrchestraSurface(self.tools, s.search_tool, s.python_tool, s.max_context_chars)
        if s.surface == "orchestra" else BasicSurface(self.tools, s.search_tool, s.python_tool))
    self.grader = self._grader()
    self.preference_draw = PreferenceDraw.from_profiles(s.profiles, self.surface.choices(),
                                                        "env.settings.profiles")
    overrides = {"id_field": s.id_field, "question_field": s.question_field,
                 "answer_field": s.answer_field, "answer_marker": s.answer_marker}
    self.task_file = dataclasses.replace(dataset_file(s.dataset),
                                    **{k: v for k, v in overrides.items() if v is not None})
    self._tasks = [dataclasses.replace(task, metadata={**task.metadata, "dataset": s.dataset},
                                       preference=self.preference_draw.for_task(task.task_id))
                   for task in read_task_file(self.task_file, "env.settings.dataset")]

  def _grader(self) -> Grader:
    s = self.settings
    if s.grader == "exact":
      return ExactMatch()
    if s.grader == "numeric":
      return NumericMatch()
    judge = require_tool(self.tools, s.judge_tool, "env.settings.judge_tool")
    models = expert_models(judge, "env.settings.judge_tool")
    if s.judge_model not in models:
      raise ConfigError(f"env.settings.judge_model: '{s.judge_model}' is not offered by tool"
                        f" '{s.judge_tool}' (models: {', '.join(models)})")
    return LLMJudge(judge, s.judge_model)

  def tasks(self, split: str | None = None) -> Sequence[Task]:
    """The tasks of `split` (default `settings.split`) in file order, the first `limit` of them."""
    s = self.settings
    split = split or s.split
    if split not in SPLITS:
      raise ConfigError(f"unknown split '{split}' of QA dataset '{s.dataset}'; splits: {SPLITS}")
    tasks = [task for task in self._tasks if in_split(task.task_id, split, s.test_fraction)]
    return tasks[:s.limit or None]

  def choices(self) -> list[str]:
    return sorted(self.surface.choices())

  def profiles(self) -> list[Preference]:
    return list(self.preference_draw.preferences)

  def abilities(self) -> frozenset[Ability]:
    """The gold policy answers the gold text, which only the basic surface lets the policy do."""
    found = super().abilities()
    return found if self.settings.surface == "basic" else found - {Ability.GOLD_POLICY}

  def start(self, task: Task) -> QAEpisode:
    prompt = self.surface.instructions
    if task.preference:
      prompt += "\n\n" + task.preference.describe()
    return QAEpisode(task, prompt, self.surface.bind(task.prompt), self.grader)

  def gold_script(self, task: Task) -> Script:
    """Answers the gold text at once (basic surface): a self-check of data and grader."""
    if self.settings.surface != "basic":
      raise NotImplementedError("the orchestra surface answers through an expert model, so it has"
                                " no gold policy; use surface: basic")
    answer = str(task.answer)
    return lambda messages, tools: {"role": "assistant", "content": "", "tool_calls": [
        {"name": FINAL, "arguments": {"text": answer}}]}
