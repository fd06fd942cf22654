"""QA episodes through the real loop (`run_episode`, Qwen3 tokenizer, `ScriptedPolicy`).

The orchestra surface's experts are a real HTTP server on 127.0.0.1 speaking OpenAI chat
completions: the search expert writes a query that BM25 runs over `corpus/corpus.jsonl`, the
reasoner writes Python that runs in the sandbox, and the answer expert answers from what it is
shown. A step's cost and latency must be its expert's plus its tool's.
"""

import asyncio
import json

import pytest

from tests.tools.loopback import completion, serve
from toolorch_jax.rollout import EpisodeConfig, ScriptedPolicy, run_episode
from toolorch_jax.datadir import data_path
from toolorch_jax.envs.qa import QAEnvironment, Settings
from toolorch_jax.tokenizer import load_tokenizer
from toolorch_jax.tools import ToolCall, ToolContext
from toolorch_jax.tools.sandbox import SandboxConfig, SandboxUnavailable, choose_level

QUESTION = "Who designed the dome of Pavia Cathedral?"
PRICE = {"searcher": (1.25, 10.0), "coder": (0.8, 0.8), "answerer": (0.25, 2.0)}  # $ per Mtok
USAGE = {"searcher": (1000, 20), "coder": (1200, 30), "answerer": (2000, 10)}  # tokens in, out
CODE = "Count them:\n```python\nprint(sum(range(10)))\n```"


def expert_cost(model):
  (tokens_in, tokens_out), (per_in, per_out) = USAGE[model], PRICE[model]
  return (tokens_in * per_in + tokens_out * per_out) / 1e6


def between(text, start, end="\n"):
  return text.split(start, 1)[1].split(end, 1)[0]


def experts(code_reply=CODE):
  """Three models behind one endpoint, and a broken one. The answerer knows only what the context
  it is shown says; asked as a judge, it compares the student answer with the reference."""
  def reply(seen):
    model, prompt = seen.body["model"], seen.body["messages"][-1]["content"]
    if model == "broken":
      return ("json", 500, {"error": "overloaded"})
    if model == "searcher":
      text = "<think>the dome</think>\n<query>Pavia Cathedral dome designed</query>"
    elif model == "coder":
      text = code_reply
    elif "Reference answer: " in prompt:
      agree = between(prompt, "Reference answer: ") in between(prompt, "Student answer: ")
      text = "Yes." if agree else "No."
    else:
      text = f"<answer>{'Carlo Maciachini' if 'Maciachini' in prompt else 'unknown'}</answer>"
    return ("json", 200, completion(text, *USAGE[model], model))
  return reply


def write_toolset(tmp_path, url):
  """A tool set like `toolorchestra` whose models are served by the loopback server (YAML is a
  superset of JSON)."""
  quick = {"max_attempts": 1, "timeout_s": 5}
  expert = lambda models: {"type": "llm_expert", "settings": {"models": models, "retry": quick}}
  config = {
      "tools": {
          "search": expert(["search-1"]), "enhance_reasoning": expert(["reasoner-1"]),
          "answer": expert(["answer-1", "answer-2"]),
          "python": {"type": "code_interpreter", "price": {"per_second": 8.3e-6},
                     "backend": "sandbox", "settings": {"timeout_s": 20, "cpu_s": 20}},
          "local_search": {"type": "bm25_search", "price": {"per_call": 0.001},
                           "settings": {"top_k": 2, "index_dir": str(tmp_path / "index")}}},
      "models": {name: {"base_url": f"{url}/v1", "price": {"per_mtok_input": i,
                                                           "per_mtok_output": o}}
                 for name, (i, o) in {**PRICE, "broken": (0, 0)}.items()},
      "aliases": {"search-1": "searcher", "reasoner-1": "coder", "answer-1": "answerer",
                  "answer-2": "broken"}}
  path = tmp_path / "tools.yaml"
  path.write_text(json.dumps(config))
  return str(path)


@pytest.fixture(scope="module")
def qwen():
  return load_tokenizer(data_path("qwen3"))


@pytest.fixture
def server():
  with serve([experts()]) as running:
    yield running


@pytest.fixture
def orchestra(tmp_path, server):
  questions = tmp_path / "pavia.jsonl"
  questions.write_text(json.dumps({"id": "pavia", "question": QUESTION,
                                   "answer": "Carlo Maciachini"}) + "\n")
  settings = Settings(dataset=str(questions), split="all", surface="orchestra",
                      toolset=write_toolset(tmp_path, server.url), grader="exact")
  return QAEnvironment(settings)


def script(*turns):
  """One turn per list of (tool, arguments); the last turn repeats."""
  def next_message(messages, tools):
    index = min(sum(m["role"] == "assistant" for m in messages), len(turns) - 1)
    return {"role": "assistant", "content": "", "tool_calls": [
        {"name": name, "arguments": args} for name, args in turns[index]]}
  return next_message


def play(env, qwen, *turns):
  task = env.tasks()[0]
  episode = env.start(task)
  policy = ScriptedPolicy(qwen, script(*turns))
  return asyncio.run(run_episode(policy, episode, qwen, EpisodeConfig(max_turns=6))), episode


def sandbox_or_skip():
  try:
    return choose_level(SandboxConfig())
  except SandboxUnavailable as err:
    pytest.skip(f"the code interpreter cannot run code here: {err}")


def test_orchestra_search_reason_answer_end_to_end(orchestra, qwen, server):
  isolation = sandbox_or_skip()
  trajectory, episode = play(orchestra, qwen, [("search", {"model": "search-1"})],
                             [("enhance_reasoning", {"model": "reasoner-1"})],
                             [("answer", {"model": "answer-1"})])
  assert trajectory.finish == "env" and trajectory.outcome == 1.0
  assert episode.grade.reason == "exact match"
  assert [c.name for c in trajectory.calls] == ["search", "enhance_reasoning", "answer"]
  assert [c.error for c in trajectory.calls] == [None, None, None]
  search, reason, answer = trajectory.calls

  # What each expert was asked, and what the policy saw.
  asked = [r.body["messages"][-1]["content"] for r in server.requests]
  assert [r.body["model"] for r in server.requests] == ["searcher", "coder", "answerer"]
  assert asked[0].startswith(f"Question: {QUESTION}\n") and "<query>" in asked[0]
  assert "Maciachini" in asked[1] and "```python" in asked[1]  # the passages found so far
  assert "Maciachini" in asked[2] and "```output\n45\n```" in asked[2]  # passages and code output
  assert search.result.startswith("Query: Pavia Cathedral dome designed\n\n[1] id=5")
  assert [p["id"] for p in search.metadata["run"]["passages"]] == ["5", "4"]
  assert reason.result == "```python\nprint(sum(range(10)))\n```\n\n```output\n45\n```"
  assert reason.metadata["run"]["isolation"] == isolation
  assert answer.result == "Final answer: Carlo Maciachini"
  assert answer.metadata["grade"] == {"score": 1.0, "reason": "exact match", "cost_usd": 0.0,
                                      "latency_s": 0.0}

  # Each step costs its expert's tokens plus its tool's run, and takes both their times.
  python_cost = reason.metadata["run"]["cost_usd"]  # billed per second of the sandbox run
  assert 0 < python_cost == pytest.approx(8.3e-6 * reason.metadata["run"]["wall_s"], abs=1e-9)
  tool_costs = [0.001, python_cost, 0.0]
  print(f"\norchestra episode, sandbox isolation {isolation}:")
  for call, model, tool_cost in zip(trajectory.calls, ["searcher", "coder", "answerer"],
                                    tool_costs):
    expert = call.metadata["expert"]
    run = call.metadata.get("run", {"cost_usd": 0.0, "latency_s": 0.0})
    print(f"  {call.name:18} cost ${call.cost_usd:.8f} = expert ${expert['cost_usd']:.8f}"
          f" + tool ${run['cost_usd']:.8f}; latency {call.latency_s:.3f} s ="
          f" {expert['latency_s']:.3f} + {run['latency_s']:.3f}")
    assert expert["cost_usd"] == pytest.approx(expert_cost(model))
    assert expert["input_tokens"] == USAGE[model][0]
    assert run["cost_usd"] == pytest.approx(tool_cost)
    assert call.cost_usd == pytest.approx(expert_cost(model) + tool_cost)
    assert call.latency_s == pytest.approx(expert["latency_s"] + run["latency_s"])
    assert expert["latency_s"] > 0
  assert trajectory.cost_usd == pytest.approx(
      sum(expert_cost(m) for m in USAGE) + 0.001 + python_cost)
  assert trajectory.latency_s == pytest.approx(sum(c.latency_s for c in trajectory.calls))
  print(f"  total ${trajectory.cost_usd:.8f}, {trajectory.latency_s:.3f} s")


def test_orchestra_schemas_and_prompt(orchestra):
  episode = orchestra.start(orchestra.tasks()[0])
  system, user = episode.messages()
  assert user == {"role": "user", "content": QUESTION}
  assert "`enhance_reasoning`" in system["content"] and "call it alone" in system["content"]
  schemas = {s["function"]["name"]: s["function"] for s in episode.tool_schemas()}
  assert list(schemas) == ["search", "enhance_reasoning", "answer"]
  assert schemas["answer"]["parameters"]["properties"]["model"]["enum"] == ["answer-1", "answer-2"]
  assert schemas["answer"]["parameters"]["required"] == ["model"]
  assert "answer-1 | $0.25 | $2" in schemas["answer"]["description"]  # the expert's price table


def test_answer_without_context_is_graded_wrong(orchestra, qwen):
  trajectory, episode = play(orchestra, qwen, [("answer", {"model": "answer-1"})])
  assert (trajectory.finish, trajectory.outcome) == ("env", 0.0)
  assert episode.grade.reason == "no exact match: 'unknown' vs gold 'carlo maciachini'"
  assert trajectory.cost_usd == pytest.approx(expert_cost("answerer"))


def test_calls_beside_answer_are_not_run_and_a_failed_expert_scores_zero(orchestra, qwen, server):
  trajectory, episode = play(orchestra, qwen, [("answer", {"model": "answer-2"}),
                                               ("search", {"model": "search-1"})])
  assert trajectory.finish == "env" and trajectory.outcome == 0.0
  answer, search = trajectory.calls
  assert search.error == "not run: 'answer' ended the episode"
  assert answer.error.startswith("expert 'answer-2' failed: gave up on")
  assert "HTTP 500" in answer.error
  assert episode.grade.reason.startswith("no answer: expert 'answer-2' failed")
  assert [r.body["model"] for r in server.requests] == ["broken"]  # the search expert never asked


def test_a_malformed_answer_is_an_error_not_the_end(orchestra, qwen):
  trajectory, _ = play(orchestra, qwen, [("answer", {"model": "answer-9"})],
                       [("search", {})], [("answer", {"model": "answer-1"})])
  bad_answer, bad_search, answer = trajectory.calls
  assert "'answer-9' is not one of ['answer-1', 'answer-2']" in bad_answer.error
  assert "'model' is a required property" in bad_search.error
  assert answer.error is None and trajectory.finish == "env" and len(trajectory.turns) == 3
  assert trajectory.faults == {"tool_error": 2}


def test_execute_without_observe_still_ends_and_grades(orchestra):
  episode = orchestra.start(orchestra.tasks()[0])
  result = asyncio.run(episode.execute(ToolCall("answer", {"model": "answer-1"}), ToolContext()))
  assert episode.done and result.metadata["prediction"] == "unknown" and episode.score() == 0.0
  late = asyncio.run(episode.execute(ToolCall("search", {"model": "search-1"}), ToolContext()))
  assert late.error == "not run: 'answer' ended the episode"


def test_code_that_fails_is_shown_and_unrunnable_code_is_an_error(tmp_path, qwen):
  sandbox_or_skip()
  results = []
  for code_reply in ("```python\nraise SystemExit('no luck')\n```", "I would rather not."):
    with serve([experts(code_reply)]) as server:
      env = QAEnvironment(Settings(dataset="frames", limit=1, surface="orchestra", split="all",
                                   toolset=write_toolset(tmp_path, server.url)))
      results.append(play(env, qwen, [("enhance_reasoning", {"model": "reasoner-1"})],
                          [("answer", {"model": "answer-1"})])[0].calls[0])
  failed, no_code = results
  assert failed.error is None
  assert failed.result.endswith("```output\n[stderr]\nno luck\n\n[exit status 1: no luck]\n```")
  assert no_code.error == "the expert wrote no ```python block"
  assert no_code.cost_usd == pytest.approx(expert_cost("coder"))  # the expert is paid all the same


def test_basic_surface_search_python_answer(tmp_path, server, qwen):
  sandbox_or_skip()
  env = QAEnvironment(Settings(dataset="gsm8k", split="all", limit=1, surface="basic",
                               toolset=write_toolset(tmp_path, server.url), grader="numeric"))
  task = env.tasks()[0]
  assert task.task_id == "gsm8k-0" and task.answer == "18"
  episode = env.start(task)
  assert [s["function"]["name"] for s in episode.tool_schemas()] == ["search", "python", "answer"]
  assert episode.tool_schemas()[0]["function"]["parameters"]["required"] == ["query"]
  trajectory, episode = play(env, qwen, [("search", {"query": "Iowa Highway 17"})],
                             [("python", {"code": "print((16 - 3 - 4) * 2)"})],
                             [("answer", {"text": "She makes $18 a day."})])
  assert trajectory.finish == "env" and trajectory.outcome == 1.0
  assert episode.grade.reason == "numbers equal: 18"
  search, python, answer = trajectory.calls
  assert search.cost_usd == 0.001 and search.result.startswith("[1] id=6 ")
  assert python.result == "18\n" and python.cost_usd == pytest.approx(
      8.3e-6 * python.metadata["wall_s"], abs=1e-9)
  assert answer.cost_usd == 0.0 and server.requests == []
  wrong, _ = play(env, qwen, [("answer", {"text": "17"})])
  assert wrong.outcome == 0.0 and wrong.calls[0].metadata["grade"]["reason"] == (
      "numbers differ: 17 vs gold 18")


def test_judge_grader_in_an_episode(tmp_path, server, qwen):
  """The judge is the answer tool's answer-1; its cost is grading's, not on the policy's bill."""
  questions = tmp_path / "q.jsonl"
  questions.write_text(json.dumps({"id": "q", "question": QUESTION, "answer": "Maciachini"}) + "\n")
  env = QAEnvironment(Settings(dataset=str(questions), split="all", surface="basic",
                               toolset=write_toolset(tmp_path, server.url), grader="judge",
                               judge_model="answer-1"))
  right, episode = play(env, qwen, [("answer", {"text": "Carlo Maciachini"})])
  assert (right.outcome, episode.grade.reason) == (1.0, "judge answer-1 says yes")
  assert episode.grade.cost_usd == pytest.approx(expert_cost("answerer"))
  assert right.cost_usd == 0.0
  wrong, episode = play(env, qwen, [("answer", {"text": "Giovanni Amadeo"})])
  assert (wrong.outcome, episode.grade.reason) == (0.0, "judge answer-1 says no")
  assert "Student answer: Giovanni Amadeo" in server.requests[-1].body["messages"][-1]["content"]
