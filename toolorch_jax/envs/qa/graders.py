"""Outcome graders for QA: normalised exact match, numeric match, and an LLM judge.

Graders are async because the judge asks an expert over HTTP; they never raise: a judge that
fails or answers something that is neither yes nor no gives a 0 with the reason recorded, so a
flaky judge shows up in the trajectories instead of ending a rollout.
"""

from __future__ import annotations

import dataclasses
import math
import re
import string
from typing import Protocol

from toolorch_jax.envs.qa.replies import strip_think
from toolorch_jax.tools.base import Tool, ToolContext

GRADERS = ("exact", "numeric", "judge")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
# A number not glued to the digits before it ("10-5" ends in 5, not -5); thousands commas allowed.
_NUMBER = re.compile(r"(?<![\d.,])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|(?<![\d.,])-?\.\d+")
_GSM8K_FINAL = "####"
_VERDICT = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)
JUDGE_PROMPT = (
    "Question: {question}\n\nStudent answer: {prediction}\n\nReference answer: {gold}\n\n"
    "Assume that the reference answer is correct. Does the student answer match the reference"
    " answer? Reply with one word: yes or no.")


@dataclasses.dataclass(frozen=True)
class Grade:
  """A score in [0, 1], why, and what grading cost (a judge's tokens; not the policy's bill)."""

  score: float
  reason: str
  cost_usd: float = 0.0
  latency_s: float = 0.0


class Grader(Protocol):
  async def grade(self, question: str, prediction: str, gold: str,
                  context: ToolContext | None = None) -> Grade: ...


def normalize(text: str) -> str:
  """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
  text = _ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION))
  return " ".join(text.split())


def final_number(text: str) -> float | None:
  """The number right after GSM8K's last `####` if there is one, else the last number."""
  marked = _GSM8K_FINAL in text
  found = _NUMBER.findall(text.rsplit(_GSM8K_FINAL, 1)[1] if marked else text)
  return float(found[0 if marked else -1].replace(",", "")) if found else None


class ExactMatch:
  async def grade(self, question: str, prediction: str, gold: str,
                  context: ToolContext | None = None) -> Grade:
    ours, theirs = normalize(prediction), normalize(gold)
    if ours and ours == theirs:
      return Grade(1.0, "exact match")
    return Grade(0.0, f"no exact match: {ours!r} vs gold {theirs!r}")


class NumericMatch:
  async def grade(self, question: str, prediction: str, gold: str,
                  context: ToolContext | None = None) -> Grade:
    ours, theirs = final_number(prediction), final_number(gold)
    if theirs is None:
      return Grade(0.0, f"the gold answer {gold!r} has no number")
    if ours is None:
      return Grade(0.0, "no number in the answer")
    if math.isclose(ours, theirs, rel_tol=1e-6, abs_tol=1e-9):
      return Grade(1.0, f"numbers equal: {ours:.15g}")
    return Grade(0.0, f"numbers differ: {ours:.15g} vs gold {theirs:.15g}")


def parse_verdict(reply: str) -> bool | None:
  """True for yes, False for no, None when the reply says neither (or both)."""
  words = {word.lower() for word in _VERDICT.findall(strip_think(reply))}
  yes, no = bool(words & {"yes", "true"}), bool(words & {"no", "false"})
  return yes if yes != no else None


@dataclasses.dataclass
class LLMJudge:
  """Asks an expert (a tool taking `model` and `prompt`, e.g. `llm_expert`) whether the answer
  matches the gold. An answer equal to the gold after normalisation passes without asking, as in
  ToolOrchestra's evaluation; an empty one fails without asking."""

  expert: Tool
  model: str

  async def grade(self, question: str, prediction: str, gold: str,
                  context: ToolContext | None = None) -> Grade:
    if not normalize(prediction):
      return Grade(0.0, "empty answer")
    if normalize(prediction) == normalize(gold):
      return Grade(1.0, "exact match (judge not asked)")
    prompt = JUDGE_PROMPT.format(question=question, prediction=prediction, gold=gold)
    result = await self.expert.call({"model": self.model, "prompt": prompt}, context)
    paid = {"cost_usd": result.cost_usd, "latency_s": result.latency_s}
    if result.error:
      return Grade(0.0, f"judge failed: {result.error}", **paid)
    verdict = parse_verdict(result.text)
    if verdict is None:
      return Grade(0.0, f"judge verdict not understood: {result.text[:200]!r}", **paid)
    return Grade(float(verdict), f"judge {self.model} says {'yes' if verdict else 'no'}", **paid)
