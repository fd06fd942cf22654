"""Report targets declared in YAML give what the embedded run's hard-coded targets gave."""

from toolorch_jax.config import config_dir, load_config
from toolorch_jax.rl.config import RunConfig
from toolorch_jax.rl.targets import TargetConfig, check_targets


UNIT = 0.003637  # the default run's unit of cost: always GPT-4 minus always Mixtral per training task


def profile(reward, accuracy, cost, cost_weight):
  return {"mean_reward": reward, "accuracy": accuracy, "mean_cost_usd": cost,
          "utility": accuracy - cost_weight * cost / UNIT}


# The embedded run's report of stop 11's closing note: its targets were then computed in code as
# reward_improved yes, cost_first_spends_40pct_less yes, above_random_mixing no.
BEFORE = {"accuracy first": profile(1.742, 0.695, 0.001901, 0.0),
          "cost first": profile(2.085, 0.742, 0.002026, 1.0)}
AFTER = {"accuracy first": profile(2.539, 0.848, 0.003793, 0.0),
         "cost first": profile(1.602, 0.613, 0.000097, 1.0)}
BASELINES = {"always_strong": {"accuracy": 0.855, "mean_cost_usd": 0.003844},
             "random_at_matched_cost": {
                 "accuracy first": {"accuracy": 0.852, "mean_cost_usd": 0.003793},
                 "cost first": {"accuracy": 0.617, "mean_cost_usd": 0.000097}}}


def test_the_default_runs_targets_from_its_yaml():
  targets = load_config(RunConfig, config_dir() / "local.yaml").report.targets
  assert check_targets(targets, BEFORE, AFTER, BASELINES) == {
      "utility_improved": True, "cost_first_spends_40pct_less": True,
      "above_random_mixing/accuracy first": False, "above_random_mixing/cost first": False}


def test_each_comparison():
  def met(**target):
    return check_targets([TargetConfig(name="t", **target)], BEFORE, AFTER, BASELINES)["t"]
  assert met(profile="cost first") is False  # its reward fell, 2.085 -> 1.602,
  assert met(profile="cost first", metric="utility") is True  # where it did what the profile asks
  assert met(profile="accuracy first", metric="accuracy") is True
  assert met(metric="mean_cost_usd", profile="cost first", against="profile:accuracy first",
             relation="at_most", factor=0.02) is False  # 2.6% of it, not 2%
  assert met(metric="accuracy", profile="accuracy first", against="baseline:always_strong") is False
  assert met(metric="accuracy", profile="accuracy first", against="baseline:always_strong",
             factor=0.99) is True


def test_utility_against_baselines_and_a_margin():
  before = {"cost first": {"utility": 0.60, "accuracy": 0.70}}
  after = {"cost first": {"utility": 0.68, "accuracy": 0.745}}
  baselines = {"always_weak": {"accuracy": 0.617, "utility": {"cost first": 0.611}},
               "random_at_matched_cost": {"cost first": {"accuracy": 0.674, "utility": 0.62}}}
  def met(**target):
    return check_targets([TargetConfig(name="t", **target)], before, after, baselines)["t"]
  assert met(metric="utility", profile="cost first", against="baseline:always_weak") is True
  assert met(metric="utility", profile="cost first", against="baseline:random_at_matched_cost") is True
  assert met(metric="utility", profile="cost first", against="baseline:always_weak", margin=0.07) is False
  assert met(metric="accuracy", profile="cost first", against="baseline:random_at_matched_cost",
             margin=0.03) is True  # 0.745 > 0.704
  assert met(metric="accuracy", profile="cost first", against="baseline:random_at_matched_cost",
             margin=0.075) is False
  assert met(metric="utility", profile="cost first") is True
