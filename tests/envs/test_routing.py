"""Routing over RouteLLM's recorded GSM8K answers: splits, decisions, outcomes, prices."""

import asyncio
import collections
import csv
import json

import pytest

from toolorch_jax import cli
from toolorch_jax.rollout import EpisodeConfig, ScriptedPolicy, run_episode
from toolorch_jax.config import ConfigError
from toolorch_jax.datadir import data_path
from toolorch_jax.envs import load_env
from toolorch_jax.envs.routing import has_usable_result
from toolorch_jax.rl.report import decision_shares
from toolorch_jax.rl.trainer import decision_metrics
from toolorch_jax.tokenizer import load_tokenizer

GPT4, MIXTRAL = "gpt-4-1106-preview", "mistralai/Mixtral-8x7B-Instruct-v0.1"


@pytest.fixture(scope="module")
def env():
  return load_env("routing")


@pytest.fixture(scope="module")
def qwen():
  return load_tokenizer(data_path("qwen3"))


@pytest.fixture(scope="module")
def recorded():
  with data_path("routellm/gsm8k_responses.csv").open(newline="", encoding="utf-8") as f:
    return {row["prompt"].strip(): row for row in csv.DictReader(f)}


def play(env, task, qwen, turns):
  calls = iter(turns)
  policy = ScriptedPolicy(qwen, lambda m, t: {"role": "assistant", "content": "",
                                              "tool_calls": [next(calls)]})
  return asyncio.run(run_episode(policy, env.start(task), qwen, EpisodeConfig(max_turns=4)))


def test_splits_are_disjoint_deterministic_and_cover_the_table(env, recorded):
  train, test = env.tasks("train"), env.tasks("test")
  assert len(train) + len(test) == len(recorded) == 1319
  assert 0.15 < len(test) / 1319 < 0.25
  assert not {t.task_id for t in train} & {t.task_id for t in test}
  assert [t.task_id for t in load_env("routing").tasks("test")] == [t.task_id for t in test]
  assert {t.preference.name for t in train} == {"accuracy first", "cost first", "prefers answer-2"}


def test_answer_directly_consult_accept_and_escalate(env, qwen, recorded):
  # a task where GPT-4 was right and Mixtral wrong
  task = next(t for t in env.tasks("train")
              if t.metadata["correct"] == {"answer-1": True, "answer-2": False})
  row = recorded[task.prompt.strip()]
  assert row[GPT4] == "True" and row[MIXTRAL] == "False"

  direct = play(env, task, qwen, [{"name": "answer", "arguments": {"model": "answer-2"}}])
  assert direct.outcome == 0.0 and direct.finish == "env" and direct.tool_counts == {"answer-2": 1}

  accepted = play(env, task, qwen, [{"name": "consult", "arguments": {"model": "answer-2"}},
                                    {"name": "accept", "arguments": {}}])
  assert accepted.outcome == 0.0 and accepted.tool_counts == {"answer-2": 1}  # accepting is no second call
  assert accepted.turns[0].observations[0] == row[MIXTRAL + "_response"].strip()

  escalated = play(env, task, qwen, [{"name": "consult", "arguments": {"model": "answer-2"}},
                                     {"name": "answer", "arguments": {"model": "answer-1"}}])
  assert escalated.outcome == 1.0
  assert escalated.tool_counts == {"answer-2": 1, "answer-1": 1}
  assert escalated.cost_usd == pytest.approx(sum(c.cost_usd for c in escalated.calls))
  assert escalated.calls[1].cost_usd > 10 * escalated.calls[0].cost_usd  # GPT-4 is pricier
  assert escalated.latency_s > 0


def test_mistakes_are_observations(env, qwen):
  task = env.tasks("train")[0]
  trajectory = play(env, task, qwen, [{"name": "accept", "arguments": {}},
                                      {"name": "consult", "arguments": {"model": "gpt-9"}},
                                      {"name": "answer", "arguments": {"model": "answer-1"}}])
  observations = [t.observations[0] for t in trajectory.turns[:2]]
  assert observations[0] == "Error: nothing to accept: consult a model first"
  assert observations[1].startswith("Error: bad arguments for 'consult'") or "unknown model" in observations[1]
  assert trajectory.faults == {"tool_error": 2} and trajectory.finish == "env"


def test_preference_is_stated_and_kept(env):
  task = next(t for t in env.tasks("train") if t.preference.name == "cost first")
  system, user = (m["content"] for m in env.start(task).messages())
  assert "answer-1 | $10 | $30" in system
  assert user.startswith(task.prompt) and user.endswith("low cost (weight 1).")
  assert task.preference.to_dict()["cost"] == 1.0


def test_oracle_accuracy_is_any_expert_right(env, recorded, tmp_path):
  assert cli.main(["eval", "--env", "routing", "--policy", "gold", "--split", "test",
                   "--out", str(tmp_path)]) == 0
  summary = json.loads((tmp_path / "summary.json").read_text())
  expected = sum(any(t.metadata["correct"].values()) for t in env.tasks("test")) / len(env.tasks("test"))
  assert summary["success_rate"] == pytest.approx(expected)
  rows = [recorded[t.prompt.strip()] for t in env.tasks("test")]
  assert expected == pytest.approx(sum(r[GPT4] == "True" or r[MIXTRAL] == "True" for r in rows) / len(rows))


def test_a_consult_shows_the_end_of_the_answer(recorded):
  env = load_env("routing", overrides=["settings.max_answer_chars=120"])
  task = next(t for t in env.tasks("train") if len(recorded[t.prompt.strip()][MIXTRAL + "_response"].strip()) > 400)
  full = recorded[task.prompt.strip()][MIXTRAL + "_response"].strip()
  shown = env.response(task, "answer-2")
  assert shown == "..." + full[-120:] and "####" in shown  # GSM8K's result line is kept


def test_corpus_holds_every_answer_a_consult_can_show(env):
  corpus = set(env.corpus())
  assert len(corpus) > 2000  # two experts' answers to 1,319 questions, a few alike
  for task in (env.tasks("test")[0], env.tasks("train")[-1]):
    assert env.response(task, "answer-1") in corpus and env.response(task, "answer-2") in corpus


def test_demonstrations_state_the_priority_but_choose_at_random(env):
  demos = env.demonstrations(env.tasks("train"), 3000, seed=1)
  preference_of = {t.prompt: t.preference for t in env.tasks("train")}
  first, after_consult = collections.Counter(), collections.Counter()
  for demo in demos:
    profile = preference_of[demo["messages"][1]["content"].rsplit("\n\n", 1)[0]]
    calls = [m for m in demo["messages"] if m["role"] == "assistant"]
    assert all(m["content"] == f"Priority: {profile.name}." for m in calls)
    call = calls[0]["tool_calls"][0]
    first[(profile.name, call["name"], call["arguments"]["model"])] += 1
    if call["name"] == "consult":
      second = calls[1]["tool_calls"][0]
      after_consult[(profile.name, second["name"], second["arguments"].get("model") != call["arguments"]["model"])] += 1
  # every profile sees each first call (answer or consult, either expert) about equally often
  for profile in ("accuracy first", "cost first"):
    counts = [first[(profile, name, model)] for name in ("answer", "consult") for model in ("answer-1", "answer-2")]
    assert max(counts) / min(counts) < 1.3, counts
    # after a consult: accept it or escalate to the other expert, as often; never ask it twice
    accepted, escalated = after_consult[(profile, "accept", True)], after_consult[(profile, "answer", True)]
    assert after_consult[(profile, "answer", False)] == 0
    assert 0.8 < accepted / escalated < 1.25, (accepted, escalated)


def test_profiles_are_drawn_in_proportion_to_their_share():
  profiles = ("[{name: a, share: 3}, {name: b, share: 1}]")
  env = load_env("routing", overrides=[f"settings.profiles={profiles}"])
  names = collections.Counter(t.preference.name for split in ("train", "test") for t in env.tasks(split))
  assert 0.7 < names["a"] / 1319 < 0.8
  assert [t.preference.name for t in load_env("routing", overrides=[f"settings.profiles={profiles}"]).tasks("test")] \
      == [t.preference.name for t in env.tasks("test")]
  with pytest.raises(ConfigError, match=r"settings.profiles\[1\].share must be positive"):
    load_env("routing", overrides=["settings.profiles=[{name: a}, {name: b, share: 0}]"])
  with pytest.raises(ConfigError, match=r"settings.profiles\[0\].tools.consult: not a tool or model"):
    load_env("routing", overrides=["settings.profiles=[{name: a, tools: {consult: 1}}]"])  # calls count per expert


def test_utility_is_on_one_scale_measured_once_on_the_training_split(env, qwen):
  """A unit of cost is what always-GPT-4 costs per task over always-Mixtral, on the training
  split; every profile (and every task's preference) carries it, and an episode's cost in units
  is its played cost over it."""
  train = env.tasks("train")
  points = env.baselines(train, {})
  unit = points["always_strong"]["mean_cost_usd"] - points["always_weak"]["mean_cost_usd"]
  latency_unit = points["always_strong"]["mean_latency_s"] - points["always_weak"]["mean_latency_s"]
  assert unit > 0 and latency_unit > 0
  for preference in list(env.profiles()) + [train[0].preference, env.tasks("test")[5].preference]:
    assert preference.cost_unit == pytest.approx(unit) and preference.latency_unit == pytest.approx(latency_unit)
  strong = [play(env, t, qwen, [{"name": "answer", "arguments": {"model": "answer-1"}}]) for t in train[:3]]
  weak = [play(env, t, qwen, [{"name": "answer", "arguments": {"model": "answer-2"}}]) for t in train[:3]]
  tasks = env.baselines(train[:3], {})
  assert sum(t.cost_usd for t in strong) / 3 == pytest.approx(tasks["always_strong"]["mean_cost_usd"])
  assert sum(t.cost_usd for t in weak) / 3 == pytest.approx(tasks["always_weak"]["mean_cost_usd"])
  cost_first = next(p for p in env.profiles() if p.name == "cost first")
  assert cost_first.utility(1.0, unit, 0.0) == pytest.approx(0.0)  # a right answer at one unit


def test_decisions_split_escalations_by_whether_the_answer_has_a_result_line(env, qwen):
  def mixtral_shows(usable):
    return next(t for t in env.tasks("train")
                if ("\n#### " in env.response(t, "answer-2")) == usable
                and (usable or "####" not in env.response(t, "answer-2")))
  sound, unsound = mixtral_shows(True), mixtral_shows(False)
  consult = {"name": "consult", "arguments": {"model": "answer-2"}}
  episodes = [play(env, sound, qwen, [consult, {"name": "accept", "arguments": {}}]),
              play(env, sound, qwen, [consult, {"name": "accept", "arguments": {}}]),
              play(env, sound, qwen, [consult, {"name": "answer", "arguments": {"model": "answer-1"}}]),
              play(env, sound, qwen, [consult, {"name": "answer", "arguments": {"model": "answer-2"}}]),
              play(env, unsound, qwen, [consult, {"name": "answer", "arguments": {"model": "answer-1"}}]),
              play(env, unsound, qwen, [{"name": "answer", "arguments": {"model": "answer-2"}}])]
  counts = env.decisions([e.calls for e in episodes])
  assert {k: v for k, v in counts.items() if "answer-1" not in k} == {
      "episodes": 6, "consult_first": 5, "answer-2 usable: consults": 4,
      "answer-2 usable: escalated": 1, "answer-2 usable: re-asked": 1,  # the same expert again: no escalation
      "answer-2 unusable: consults": 1, "answer-2 unusable: escalated": 1, "answer-2 unusable: re-asked": 0}
  assert counts["answer-1 usable: consults"] == counts["answer-1 unusable: consults"] == 0
  # the report shows them as shares: of the episodes, or of the group's consults
  shares = decision_shares(counts)
  assert {k: v for k, v in shares.items() if "answer-1" not in k} == {
      "consult_first": 5 / 6, "answer-2 usable: consults": 4, "answer-2 usable: escalated": 0.25,
      "answer-2 usable: re-asked": 0.25, "answer-2 unusable: consults": 1,
      "answer-2 unusable: escalated": 1.0, "answer-2 unusable: re-asked": 0.0}
  assert shares["answer-1 usable: escalated"] is None  # never consulted
  # the trainer logs the counts per step and profile; they sum over a window of steps
  metrics = decision_metrics(env, episodes)
  sound_profile, unsound_profile = sound.preference.name, unsound.preference.name
  totals = collections.Counter()
  for key, value in metrics.items():
    profile, decision = key.removeprefix("decisions/").split("/")
    assert profile in (sound_profile, unsound_profile)
    totals[decision] += value
  assert decision_shares(totals) == shares
  assert metrics[f"decisions/{unsound_profile}/answer-2 unusable: escalated"] == 1


def test_demonstrations_consult_first_in_the_configured_share():
  env = load_env("routing", overrides=["settings.demo_consult_share=0.75"])
  demos = env.demonstrations(env.tasks("train"), 2000, seed=0)
  consults = sum(next(m for m in d["messages"] if m["role"] == "assistant")["tool_calls"][0]["name"] == "consult"
                 for d in demos)
  assert 0.72 < consults / 2000 < 0.78
  with pytest.raises(ConfigError, match="settings.demo_consult_share must be in"):
    load_env("routing", overrides=["settings.demo_consult_share=1.5"])


def test_cascade_demonstrations_consult_the_cheapest_expert_then_escalate_by_chance():
  env = load_env("routing", overrides=["settings.demo_consult_share=1.0", "settings.demo_cascade=true"])
  assert env.cheapest == "answer-2"  # Mixtral's list price is below GPT-4's
  demos = env.demonstrations(env.tasks("train"), 1000, seed=0)
  calls = [[m["tool_calls"][0] for m in d["messages"] if m["role"] == "assistant"] for d in demos]
  assert all(c[0] == {"name": "consult", "arguments": {"model": "answer-2"}} for c in calls)
  escalated = [c[1] == {"name": "answer", "arguments": {"model": "answer-1"}} for c in calls]
  assert all(e or c[1]["name"] == "accept" for e, c in zip(escalated, calls))
  assert 0.45 < sum(escalated) / 1000 < 0.55
  # whether a demonstration escalates does not depend on what the consult showed
  usable = [has_usable_result(next(m["content"] for m in d["messages"] if m["role"] == "tool"))
            for d in demos]
  for kind in (True, False):
    picked = [e for e, u in zip(escalated, usable) if u == kind]
    assert 0.38 < sum(picked) / len(picked) < 0.62
