"""What `toolorch train` checks before it spends any time, and the texts its tokenizer learns."""

import pytest

pytest.importorskip("jetstream", reason="the training pipeline needs the 'serve' extra and JetStream")

from toolorch_jax.config import ConfigError, config_dir, load_config  # noqa: E402
from toolorch_jax.envs import build_env  # noqa: E402
from toolorch_jax.rl.config import RunConfig  # noqa: E402
from toolorch_jax.rl.checks import check_run  # noqa: E402
from toolorch_jax.rl.tokenizer_stage import tokenizer_corpus  # noqa: E402
from toolorch_jax.tokenizer import render_chat  # noqa: E402

LOCAL = config_dir() / "local.yaml"
LONG = config_dir() / "local-long.yaml"
TAU2 = config_dir() / "tau2_mock.yaml"


def checked(path, *overrides):
  config = load_config(RunConfig, path, overrides)
  check_run(config, build_env(config.env))


@pytest.mark.parametrize("path, overrides, message", [
    (None, ["env.name=qa", "env.settings={dataset: gsm8k, surface: basic, toolset: local,"
            " search_tool: search}", "warmstart.demonstrations=8"],
     "warmstart.demonstrations: environment 'qa' has no demonstrations (its abilities:"
     " gold_script, profiles)"),
    (TAU2, ["report.targets=[{name: r, against: 'baseline:oracle'}]"],
     "report.targets[0].against: environment 'tau2' has no baselines (its abilities:"
     " demonstrations, gold_script)"),
    (LOCAL, ["report.targets=[{name: r, profile: 'speed first'}]"],
     "report.targets[0]: no profile 'speed first' in environment 'routing' (profiles: accuracy"
     " first, cost first)"),
    (TAU2, ["rollout.split=train"],
     "rollout.split: unknown split 'train' of τ² domain 'mock'; splits: ['base']"),
    (LOCAL, ["report.split=dev"],
     "report.split: unknown split 'dev' of the routing environment; splits: train, test"),
    (TAU2, ["warmstart.selection=reward"],
     "warmstart.selection: environment 'tau2' has no demonstration_branches (its abilities:"
     " demonstrations, gold_script)"),
    (TAU2, ["report.targets=[{name: r, against: 'profile:cost first'}]"],
     "report.targets[0]: no profile 'cost first' in environment 'tau2' (profiles: all tasks)"),
])
def test_what_the_environment_lacks_is_named_at_load(path, overrides, message):
  with pytest.raises(ConfigError) as err:
    checked(path, *overrides)
  assert str(err.value) == message


def test_bad_targets_name_the_field():
  with pytest.raises(ConfigError, match="report.targets 'r': relation must be one of"):
    load_config(RunConfig, LOCAL, ["report.targets=[{name: r, relation: below}]"])
  with pytest.raises(ConfigError, match="report.targets 'r': against must be before, profile:NAME"):
    load_config(RunConfig, LOCAL, ["report.targets=[{name: r, against: yesterday}]"])


def test_the_shipped_runs_pass_their_checks():
  checked(LOCAL)
  checked(LONG)
  checked(TAU2)


def test_tokenizer_corpus_holds_prompts_answers_and_what_demonstrations_add():
  config = load_config(RunConfig, LOCAL)
  env = build_env(config.env)
  demos = env.demonstrations(env.tasks("train"), 40, seed=0)
  corpus = tokenizer_corpus(config, env, demos)
  task = env.tasks("test")[0]
  episode = env.start(task)  # the prompt rendered as the policy reads it, tools included
  assert render_chat(episode.messages(), episode.tool_schemas(), add_generation_prompt=True) in corpus
  assert len(corpus) == 1319 * 3 + 2 + 5  # prompts, two answers each, then what demos add:
  assert {"Priority: accuracy first.", "Priority: cost first.",  # the priority lines and calls
          '<tool_call>\n{"name": "accept", "arguments": {}}\n</tool_call>'} <= set(corpus[-7:])
  shown = next(m["content"] for d in demos for m in d["messages"] if m["role"] == "tool")
  assert corpus.count(shown) == 1  # a consulted answer in a demonstration is not counted twice
