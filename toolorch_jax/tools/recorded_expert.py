"""The `recorded_expert` tool: answers replayed from a table of recorded model responses.

Offline routing needs no API: RouteLLM's `gsm8k_responses.csv` holds, for each GSM8K test
question, GPT-4's and Mixtral-8x7B's answers and whether each was right. Replaying them with the
models' list prices and a latency model lets a policy learn when the strong model is worth it.
Token counts are estimated from characters (we do not have those models' tokenizers) and the
latency is modelled, not waited for; the metadata says so.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
from typing import Any

from toolorch_jax.config import ConfigError
from toolorch_jax.datadir import data_file
from toolorch_jax.tools.base import Tool, ToolContext, ToolError, ToolResult
from toolorch_jax.tools.pricing import estimate_tokens


@dataclasses.dataclass
class RecordedExpertSettings:
  """Where the recorded responses are and which models' columns the tool offers."""

  table: str = "routellm/gsm8k_responses.csv"  # CSV in the data directory, or an absolute path
  prompt_column: str = "prompt"
  # RouteLLM's layout: column '<model>' says True/False, column '<model>_response' holds the answer.
  response_suffix: str = "_response"
  # Aliases or model keys the policy may pick from; the first is the default.
  models: list[str] = dataclasses.field(default_factory=list)
  chars_per_token: float = 4.0


@functools.lru_cache(maxsize=8)
def load_table(path: str, prompt_column: str) -> tuple[tuple[str, ...], dict[str, dict[str, str]]]:
  """(columns, rows by stripped prompt) of a recorded-response CSV, read once per process."""
  with open(path, newline="", encoding="utf-8") as f:
    reader = csv.DictReader(f)
    columns = tuple(reader.fieldnames or ())
    if prompt_column not in columns:
      raise ConfigError(f"settings.prompt_column: no column '{prompt_column}' in {path}")
    return columns, {row[prompt_column].strip(): row for row in reader}


class RecordedExpert(Tool):
  """Answers a recorded prompt as the chosen model did, at that model's price."""

  Settings = RecordedExpertSettings
  description = "Ask another language model."

  def __init__(self, name: str, settings: RecordedExpertSettings | None = None, **kwargs):
    super().__init__(name, settings, **kwargs)
    s = self.settings
    if not s.models:
      raise ConfigError("settings.models: list at least one model or alias")
    columns, self.rows = load_table(str(data_file(s.table, "settings.table")), s.prompt_column)
    for i, choice in enumerate(s.models):
      model = self.models.resolve(choice, f"settings.models[{i}]").model
      for column in (model, model + s.response_suffix):
        if column not in columns:
          raise ConfigError(f"settings.models[{i}]: no column '{column}' in {s.table}")
    self.description = f"{self.description}\n{self.models.price_table(s.models)}"
    self.parameters = {"type": "object", "properties": {
        "model": {"type": "string", "enum": list(s.models),
                  "description": f"which model to ask (default {s.models[0]})"},
        "prompt": {"type": "string", "description": "the question, exactly as recorded"},
        "messages": {"type": "array", "minItems": 1, "description": "a whole conversation"
                     " instead, answered as recorded for its last message",
                     "items": {"type": "object", "required": ["role", "content"], "properties": {
                         "role": {"enum": ["system", "user", "assistant"]},
                         "content": {"type": "string"}}}}},
        "oneOf": [{"required": ["prompt"]}, {"required": ["messages"]}],
        "additionalProperties": False}

  async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    s = self.settings
    alias = arguments.get("model", s.models[0])
    spec = self.models.resolve(alias)
    messages = arguments.get("messages") or [{"content": arguments["prompt"]}]
    row = self.rows.get(messages[-1]["content"].strip())
    if row is None:
      raise ToolError(f"no recorded response of '{spec.model}' for this prompt in {s.table}")
    response = row[spec.model + s.response_suffix]
    tokens_in = estimate_tokens("".join(m["content"] for m in messages), s.chars_per_token)
    tokens_out = estimate_tokens(response, s.chars_per_token)
    return ToolResult(
        text=response, cost_usd=spec.price.cost(input_tokens=tokens_in, output_tokens=tokens_out),
        latency_s=spec.latency.latency_s(tokens_out),
        metadata={"model": spec.model, "alias": alias,
                  "correct": row[spec.model].strip().lower() == "true",
                  "input_tokens": tokens_in, "output_tokens": tokens_out,
                  "tokens_estimated": True, "latency_modelled": True})
