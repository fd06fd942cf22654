"""Recorded expert: RouteLLM's GSM8K responses replayed with list prices and a latency model."""

import asyncio
import csv
import math

import pytest

from toolorch_jax.config import ConfigError
from toolorch_jax.datadir import data_path
from toolorch_jax.tools import LatencyModel, ModelCatalog, ModelSpec, Price
from toolorch_jax.tools.recorded_expert import RecordedExpert, RecordedExpertSettings

GPT4, MIXTRAL = "gpt-4-1106-preview", "mistralai/Mixtral-8x7B-Instruct-v0.1"
CATALOG = ModelCatalog.build(
    {"gpt-4": ModelSpec(model=GPT4, price=Price(per_mtok_input=10, per_mtok_output=30),
                        latency=LatencyModel(first_token_s=0.6, output_tokens_per_s=25)),
     "mixtral": ModelSpec(model=MIXTRAL, price=Price(per_mtok_input=0.7, per_mtok_output=0.7),
                          latency=LatencyModel(first_token_s=0.3, output_tokens_per_s=80))},
    {"strong": "gpt-4", "weak": "mixtral"})


def expert(**settings):
  return RecordedExpert("answer", RecordedExpertSettings(models=["strong", "weak"], **settings),
                        models=CATALOG)


@pytest.fixture(scope="module")
def rows():
  with open(data_path("routellm/gsm8k_responses.csv"), newline="", encoding="utf-8") as f:
    return list(csv.DictReader(f))


def test_replays_the_recorded_answer_with_price_and_latency(rows):
  row = next(r for r in rows if r[GPT4] == "True" and r[MIXTRAL] == "False")
  tool = expert()
  strong = asyncio.run(tool.call({"model": "strong", "prompt": row["prompt"]}))
  weak = asyncio.run(tool.call({"model": "weak", "prompt": "  " + row["prompt"] + "\n"}))
  assert strong.text == row[GPT4 + "_response"] and weak.text == row[MIXTRAL + "_response"]
  assert strong.metadata["correct"] is True and weak.metadata["correct"] is False
  tokens_in = math.ceil(len(row["prompt"]) / 4)
  tokens_out = math.ceil(len(row[GPT4 + "_response"]) / 4)
  assert strong.metadata | {"input_tokens": tokens_in, "output_tokens": tokens_out,
                            "tokens_estimated": True, "latency_modelled": True} == strong.metadata
  assert strong.cost_usd == pytest.approx((tokens_in * 10 + tokens_out * 30) / 1e6)
  assert strong.latency_s == pytest.approx(0.6 + tokens_out / 25)
  assert weak.cost_usd < strong.cost_usd / 10  # the routing trade-off the policy has to learn


def test_whole_table_matches_routellm_accuracy(rows):
  """GPT-4 was right on 1,130 of 1,319 questions and Mixtral on 842 (shared/data/README.md)."""
  tool = expert()

  async def replay(alias):
    return await asyncio.gather(*(tool.call({"model": alias, "prompt": r["prompt"]}) for r in rows))

  for alias, right in (("strong", 1130), ("weak", 842)):
    results = asyncio.run(replay(alias))
    assert all(r.ok for r in results)
    assert sum(r.metadata["correct"] for r in results) == right


def test_unknown_prompt_and_default_model():
  tool = expert()
  result = asyncio.run(tool.call({"prompt": "What is the airspeed of an unladen swallow?"}))
  assert result.error == (f"no recorded response of '{GPT4}' for this prompt in"
                          " routellm/gsm8k_responses.csv")


def test_bad_settings_name_the_key(tmp_path):
  with pytest.raises(ConfigError, match=r"settings.table: data file 'routellm/nope.csv' not found"):
    expert(table="routellm/nope.csv")
  table = tmp_path / "t.csv"
  table.write_text(f"prompt,{GPT4},{GPT4}_response\nq,True,a\n")
  with pytest.raises(ConfigError, match=rf"settings.models\[1\]: no column '{MIXTRAL}' in {table}"):
    expert(table=str(table))
  with pytest.raises(ConfigError, match=r"settings.prompt_column: no column 'question'"):
    expert(table=str(table), prompt_column="question")
  with pytest.raises(ConfigError, match=r"settings.models\[0\]: unknown model or alias 'huge'"):
    RecordedExpert("answer", RecordedExpertSettings(models=["huge"]), models=CATALOG)
