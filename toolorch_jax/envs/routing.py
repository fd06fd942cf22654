"""Routing over recorded experts: which model should answer, under the user's preference?

Tasks are GSM8K questions that RouteLLM recorded GPT-4 and Mixtral-8x7B answering (with whether
each answer was right), so every routing decision has a real outcome, a real price and a latency,
with no LLM running. The policy can answer through an expert directly (`answer(model)`), or
`consult(model)`, read that expert's answer, and then `accept()` it or escalate to another expert:
it can learn from what it observes, not only from the question. The held-out split is chosen by
task id, deterministically.
"""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any, Sequence

from toolorch_jax.config import ConfigError
from toolorch_jax.data.split import in_split
from toolorch_jax.data.task import Preference, Task
from toolorch_jax.envs.base import Branches, Environment, Episode, Script
from toolorch_jax.envs.profiles import PreferenceDraw, ProfileConfig
from toolorch_jax.tools.base import ToolCall, ToolContext, ToolResult
from toolorch_jax.tools.pricing import estimate_tokens
from toolorch_jax.tools.registry import DEFAULT_TOOLSET, load_toolset


@dataclasses.dataclass
class RoutingSettings:
  toolset: str = DEFAULT_TOOLSET  # tool set holding the recorded expert
  expert_tool: str = "answer"  # its name there
  test_fraction: float = 0.2  # share of tasks held out, by a hash of the task id
  limit: int = 0  # first N tasks of each split (0: all)
  profiles: list[ProfileConfig] = dataclasses.field(default_factory=lambda: [
      ProfileConfig("accuracy first", accuracy=1.0),
      ProfileConfig("cost first", accuracy=1.0, cost=1.0)])
  max_answer_chars: int = 1200  # of a consulted answer shown to the policy: its end, the conclusion
  demo_consult_share: float = 0.5  # of warm-start demonstrations that consult before deciding
  # demonstrations that consult ask the cheapest expert first (a cascade, as in FrugalGPT), then
  # accept or escalate at random; false: the consulted expert is drawn at random too
  demo_cascade: bool = False


SYSTEM = "Route the math question to an expert model; do not solve it yourself.\n{prices}"


RESULT_LINE = re.compile(r"^####\s*\$?\s*(-?[\d,]+)\s*$", re.MULTILINE)


def has_usable_result(answer: str) -> bool:
  """Whether a shown answer ends with GSM8K's `#### n` line with a whole number: for the report's
  breakdown of escalations (the weak expert is right 72% of the time with one, 17% without). The
  policy never gets this flag, only the text."""
  return bool(RESULT_LINE.search(answer))


class RoutingEpisode(Episode):
  def __init__(self, task: Task, env: "RoutingEnvironment"):
    super().__init__(task)
    self.env = env
    self.last_consulted: dict[str, Any] | None = None
    self.correct = False

  def messages(self) -> list[dict[str, Any]]:
    """The prices in the system turn; the user's preference right after the question, where the
    decision is made."""
    preference = self.task.preference.describe() if self.task.preference else ""
    system = SYSTEM.format(prices=self.env.price_table)
    return [{"role": "system", "content": system},
            {"role": "user", "content": f"{self.task.prompt}\n\n{preference}".strip()}]

  def tool_schemas(self) -> list[dict[str, Any]]:
    return self.env.schemas

  async def _ask(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    model = arguments.get("model")
    if model not in self.env.models:
      return ToolResult(error=f"unknown model {model!r}; choose one of {self.env.models}")
    result = await self.env.expert.call({"model": model, "prompt": self.task.prompt}, context)
    result.metadata["counts_as"] = model  # the preference reward counts calls per expert
    return result

  async def execute(self, call: ToolCall, context: ToolContext) -> ToolResult:
    if call.name == "accept":
      if self.last_consulted is None:
        return ToolResult(error="nothing to accept: consult a model first")
      self.correct, self.done = self.last_consulted["correct"], True
      # not a tool use: the answer was paid for by the consult, which counted as the expert
      return ToolResult(text=f"accepted the answer of {self.last_consulted['alias']}",
                        metadata={"counts_as": None})
    if call.name not in ("consult", "answer"):
      return ToolResult(error=f"unknown tool {call.name!r}")
    result = await self._ask(call.arguments, context)
    if result.error:
      return result
    if call.name == "answer":
      self.correct, self.done = bool(result.metadata.get("correct")), True
      return dataclasses.replace(result, text=f"submitted the answer of {call.arguments['model']}")
    self.last_consulted = result.metadata
    return dataclasses.replace(result, text=self.env.shown(result.text))

  def score(self) -> float:
    return float(self.done and self.correct)


class RoutingEnvironment(Environment):
  name = "routing"
  Settings = RoutingSettings

  def __init__(self, settings: RoutingSettings | None = None):
    self.settings = settings or RoutingSettings()
    s = self.settings
    if not 0 <= s.test_fraction < 1:
      raise ConfigError(f"settings.test_fraction must be in [0, 1), got {s.test_fraction}")
    if not 0 <= s.demo_consult_share <= 1:
      raise ConfigError(f"settings.demo_consult_share must be in [0, 1], got {s.demo_consult_share}")
    if not s.profiles:
      raise ConfigError("settings.profiles: give at least one preference profile")
    tools = load_toolset(s.toolset)
    if s.expert_tool not in tools:
      raise ConfigError(f"settings.expert_tool: tool set '{s.toolset}' has no tool '{s.expert_tool}'")
    self.expert = tools[s.expert_tool]
    self.models: list[str] = list(self.expert.settings.models)
    self.price_table = self.expert.models.price_table(self.models)
    price = lambda m: self.expert.models.resolve(m).price
    self.cheapest = min(self.models, key=lambda m: price(m).per_mtok_input + price(m).per_mtok_output)
    choice = {"type": "object", "properties": {"model": {"type": "string", "enum": self.models}},
              "required": ["model"], "additionalProperties": False}
    self.schemas = [
        {"type": "function", "function": {"name": "consult", "parameters": choice,
                                          "description": "See a model's answer."}},
        {"type": "function", "function": {"name": "answer", "parameters": choice,
                                          "description": "Submit a model's answer as final."}},
        {"type": "function", "function": {"name": "accept", "parameters": {"type": "object", "properties": {}},
                                          "description": "Submit the consulted answer as final."}},
    ]
    # calls count per expert (consult and answer alike), so tool weights name experts
    draw = PreferenceDraw.from_profiles(s.profiles, set(self.models), "settings.profiles")
    self._tasks: dict[str, list[Task]] = {"train": [], "test": []}
    for index, (prompt, row) in enumerate(self.expert.rows.items()):
      task_id = f"gsm8k-{index:04d}"
      correct = {alias: row[self.expert.models.resolve(alias).model].strip().lower() == "true"
                 for alias in self.models}
      task = Task(task_id, prompt, metadata={"correct": correct})
      self._tasks["test" if in_split(task_id, "test", s.test_fraction) else "train"].append(task)
    self._draw = draw.in_units(*self._units(self._tasks["train"] or self._tasks["test"]))
    for task in self._tasks["train"] + self._tasks["test"]:
      task.preference = self._draw.for_task(task.task_id)

  def _units(self, tasks: Sequence[Task]) -> tuple[float, float]:
    """The fixed scale of every profile's utility, measured once on `tasks` (the training split):
    one unit of cost (latency) is what always asking the strong expert costs (takes) per task
    more than always asking the weak one."""
    strong, weak = self.models[0], self.models[-1]
    def spread(measure) -> float:
      gap = sum(measure(t, strong) - measure(t, weak) for t in tasks) / max(len(tasks), 1)
      return gap if gap > 0 else 1.0
    return spread(self._cost), spread(self._latency)

  def shown(self, answer: str) -> str:
    """A consulted answer as the policy reads it: its last `max_answer_chars` characters, where
    the conclusion (and GSM8K's `#### result` line) is, so a small context keeps what decides."""
    answer, limit = answer.strip(), self.settings.max_answer_chars
    return answer if len(answer) <= limit else "..." + answer[-limit:]

  def _recorded(self, task: Task, model: str) -> str:
    """The recorded answer of `model` to the task, in full."""
    row = self.expert.rows[task.prompt.strip()]
    return row[self.expert.models.resolve(model).model + self.expert.settings.response_suffix]

  def response(self, task: Task, model: str) -> str:
    """The recorded answer of `model` to the task, as a consult shows it."""
    return self.shown(self._recorded(task, model))

  def tasks(self, split: str | None = None) -> Sequence[Task]:
    split = split or "train"
    if split not in self._tasks:
      raise ConfigError(f"unknown split '{split}' of the routing environment; splits: train, test")
    tasks = self._tasks[split]
    return tasks[:self.settings.limit] if self.settings.limit else tasks

  def start(self, task: Task) -> RoutingEpisode:
    return RoutingEpisode(task, self)

  def corpus(self) -> list[str]:
    """Every answer a consult can show: the policy reads them, so its tokenizer should know them."""
    return [self.response(task, model) for split in self._tasks.values() for task in split
            for model in self.models]

  def choices(self) -> list[str]:
    """The experts: calls count per expert (consult and answer alike), so weights name them."""
    return list(self.models)

  def profiles(self) -> list[Preference]:
    return list(self._draw.preferences)

  def demonstrations(self, tasks: Sequence[Task], count: int, seed: int) -> list[dict[str, Any]]:
    """Warm-start conversations covering every decision (answer with an expert, or, in
    `demo_consult_share` of them, consult one and then accept or escalate), with the recorded
    answers as tool results. Every choice is random, never the best one (whether to escalate
    depends on nothing but chance), so RL still has everything to learn. With `demo_cascade` a
    consult asks the cheapest expert: which expert to consult first is then shown, not left to
    RL, whose first steps would otherwise judge consulting by a post-consult choice that is still
    random (and move to consulting the strong expert, whose answer needs no second opinion).
    Each call opens with a line naming the user's priority ("Priority: cost first."): the format
    puts the preference right where the decision is made, which a small policy links to its call
    far more easily than the statement at the end of the user turn."""
    rng = random.Random(seed)
    demos = []
    for _ in range(count):
      task = rng.choice(list(tasks))
      demos.append(self._conversation(task, rng.choice(self._branches(rng))))
    return demos

  def demonstration_branches(self, tasks: Sequence[Task], count: int, seed: int) -> list[Branches]:
    """The demonstrations above with every choice of their last decision in place of the one
    drawn (which expert answers, or, after a consult, accept or escalate to each other expert):
    the choice a warm start chosen by the reward learns."""
    rng = random.Random(seed)
    order: list[Task] = []
    while len(order) < count:
      order += rng.sample(list(tasks), len(tasks))
    return [Branches(task, [self._conversation(task, turns) for turns in self._branches(rng)])
            for task in order[:count]]

  def _branches(self, rng: random.Random) -> list[list[tuple[str, str | None]]]:
    """A demonstration's calls, drawn up to its last decision: one list per choice there."""
    if rng.random() < 1 - self.settings.demo_consult_share:
      return [[("answer", model)] for model in self.models]
    first = self.cheapest if self.settings.demo_cascade else rng.choice(self.models)
    others = [("answer", m) for m in self.models if m != first]
    return [[("consult", first), last] for last in [("accept", None)] + others]

  def _conversation(self, task: Task, turns: Sequence[tuple[str, str | None]]) -> dict[str, Any]:
    """The demonstration making `turns`' calls on `task`, the recorded answers as tool results."""
    messages = self.start(task).messages()
    priority = self._priority_line(task.preference)
    for name, model in turns:
      arguments = {} if model is None else {"model": model}
      messages.append({"role": "assistant", "content": priority,
                       "tool_calls": [{"name": name, "arguments": arguments}]})
      content = self.response(task, model) if name == "consult" else "submitted"
      messages.append({"role": "tool", "content": content})
    return {"messages": messages[:-1], "tools": self.schemas}

  @staticmethod
  def _priority_line(preference: Preference | None) -> str:
    """The line demonstrations open each call with: the user's priority, by name."""
    return f"Priority: {preference.name}." if preference and preference.name else ""

  def baselines(self, tasks: Sequence[Task], policy_costs: dict[str, float]) -> dict[str, Any]:
    """Accuracy and mean cost of fixed routings on `tasks`: always the strong (first) or the weak
    (last) expert, the oracle (cheapest right expert), and random mixing of the two at each given
    cost (the straight line between them)."""
    strong, weak = self.models[0], self.models[-1]
    def route(choose):
      picks = [choose(t) for t in tasks]
      accuracy = sum(t.metadata["correct"][m] for t, m in zip(tasks, picks)) / len(tasks)
      cost = sum(self._cost(t, m) for t, m in zip(tasks, picks)) / len(tasks)
      latency = sum(self._latency(t, m) for t, m in zip(tasks, picks)) / len(tasks)
      return {"accuracy": accuracy, "mean_cost_usd": cost, "mean_latency_s": latency}
    result = {"always_strong": route(lambda t: strong), "always_weak": route(lambda t: weak)}
    oracle_pick = lambda t: next((m for m in sorted(self.models, key=lambda m: self._cost(t, m))
                                  if t.metadata["correct"][m]), min(self.models, key=lambda m: self._cost(t, m)))
    result["oracle"] = route(oracle_pick)
    a, b = result["always_weak"], result["always_strong"]
    result["random_at_matched_cost"] = {}
    for name, cost in policy_costs.items():
      share = min(max((cost - a["mean_cost_usd"]) / (b["mean_cost_usd"] - a["mean_cost_usd"]), 0.0), 1.0)
      result["random_at_matched_cost"][name] = {
          "accuracy": a["accuracy"] + share * (b["accuracy"] - a["accuracy"]), "mean_cost_usd": cost,
          "mean_latency_s": a["mean_latency_s"] + share * (b["mean_latency_s"] - a["mean_latency_s"]),
          "strong_share": share}
    return result

  def decisions(self, episodes: Sequence[Sequence[Any]]) -> dict[str, int]:
    """How many episodes open with a consult and, per consulted expert, of its answers with and
    without a usable `#### n` line, how many were followed by a decision, how many of those were
    escalated to another expert, and how many re-asked of the same expert (paid twice for the
    answer it gave: neither accepting nor escalating)."""
    first_consults = 0
    followed = {(m, usable): [] for m in self.models for usable in (True, False)}
    for calls in episodes:
      calls = [c for c in calls if c.name in ("consult", "answer", "accept")]
      if calls and calls[0].name == "consult":
        first_consults += 1
      for consult, after in zip(calls, calls[1:]):
        model = consult.arguments.get("model") if isinstance(consult.arguments, dict) else None
        if consult.name == "consult" and model in self.models and not consult.error:
          answered = (after.arguments.get("model")
                      if after.name == "answer" and isinstance(after.arguments, dict) else None)
          followed[model, has_usable_result(consult.result)].append(answered)  # None: accepted
    result = {"episodes": len(episodes), "consult_first": first_consults}
    for (model, usable), answered in followed.items():
      kind = "usable" if usable else "unusable"
      result[f"{model} {kind}: consults"] = len(answered)
      result[f"{model} {kind}: escalated"] = sum(a is not None and a != model for a in answered)
      result[f"{model} {kind}: re-asked"] = sum(a == model for a in answered)
    return result

  def _cost(self, task: Task, model: str) -> float:
    chars = self.expert.settings.chars_per_token
    return self.expert.models.resolve(model).price.cost(
        input_tokens=estimate_tokens(task.prompt, chars),
        output_tokens=estimate_tokens(self._recorded(task, model), chars))

  def _latency(self, task: Task, model: str) -> float:
    tokens = estimate_tokens(self._recorded(task, model), self.expert.settings.chars_per_token)
    return self.expert.models.resolve(model).latency.latency_s(tokens)

  def gold_script(self, task: Task) -> Script:
    """The oracle: the cheapest expert that was right (or the cheapest one when none was)."""
    right = [alias for alias in self.models if task.metadata["correct"][alias]]
    cheapest = min(right or self.models, key=lambda m: self._cost(task, m))

    def script(messages, tools):
      return {"role": "assistant", "content": "",
              "tool_calls": [{"name": "answer", "arguments": {"model": cheapest}}]}

    return script
