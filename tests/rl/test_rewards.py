"""Rewards: outcome, efficiency, preference (direction of cost and latency), composites."""

import numpy as np
import pytest

from toolorch_jax.rollout.trajectory import ToolCallRecord, Trajectory
from toolorch_jax.config import ConfigError
from toolorch_jax.rewards import RewardComponent, RewardConfig, compute_rewards

PREF = {"tools": {"answer-1": 0.0, "answer-2": 1.0}, "accuracy": 1.0, "cost": 1.0, "latency": 1.0}


def episode(group, outcome, calls, preference=PREF):
  records = [ToolCallRecord(0, "answer", {}, "", None, cost, latency, {"counts_as": alias})
             for alias, cost, latency in calls]
  return Trajectory("task", group, f"e{len(calls)}{outcome}", calls=records, outcome=outcome,
                    preference=preference)


def test_efficiency_reward():
  config = RewardConfig([RewardComponent("efficiency")])
  cases = [episode(0, 1.0, [("a", 0.01, 100.0)]),  # 1 - 0.05 - 0.2 = 0.75
           episode(0, 1.0, [("a", 0.2, 300.0)]),  # 1 - 1 - 0.6 < 0.2 -> 0.2
           episode(0, 0.0, [("a", 0.0, 0.0)])]  # wrong -> 0
  total, parts = compute_rewards(cases, config)
  np.testing.assert_allclose(total, [0.75, 0.2, 0.0])
  np.testing.assert_allclose(parts["efficiency"], total)


def test_preference_reward_by_hand():
  group = [
      episode(0, 1.0, [("answer-2", 0.001, 1.0)]),  # cheap, fast, uses the preferred expert
      episode(0, 1.0, [("answer-1", 0.010, 5.0)]),  # expensive, slow
      episode(0, 1.0, [("answer-2", 0.001, 1.0), ("answer-1", 0.010, 5.0)]),  # both: cost .011, lat 6
      episode(0, 0.0, [("answer-2", 0.001, 1.0)]),  # wrong: 0
  ]
  total, _ = compute_rewards(group, RewardConfig([RewardComponent("preference")]))
  # features: [count answer-1, count answer-2, accuracy, -cost, -latency] over the group:
  # answer-1 counts 0,1,1,0; answer-2 counts 1,0,1,1; accuracy 1,1,1,0; -cost -.001,-.01,-.011,-.001;
  # -latency -1,-5,-6,-1. Min-max normalised, dotted with [0, 1, 1, 1, 1]:
  first = 0 + 1 + 1 + 1 + 1
  second = 0 + 0 + 1 + (0.001 / 0.010) + (1 / 5)
  third = 0 + 1 + 1 + 0 + 0
  np.testing.assert_allclose(total, [first, second, third, 0.0], rtol=1e-6)
  assert total[0] > total[1]  # cheaper and faster score higher


def test_preference_share_does_not_pay_for_calling_the_preferred_expert_twice():
  likes_1 = {"tools": {"answer-1": 1.0}, "accuracy": 1.0, "cost": 0.0, "latency": 0.0}
  group = [episode(0, 1.0, [("answer-1", 0.01, 1.0)], likes_1),  # answer with answer-1
           episode(0, 1.0, [("answer-1", 0.01, 1.0), ("answer-1", 0.01, 1.0)], likes_1),  # consult, answer
           episode(0, 1.0, [("answer-2", 0.001, 1.0), ("answer-1", 0.01, 1.0)], likes_1),  # escalate
           episode(0, 1.0, [("answer-2", 0.001, 1.0)], likes_1)]
  counts, _ = compute_rewards(group, RewardConfig([RewardComponent("preference")]))
  shares, _ = compute_rewards(group, RewardConfig([RewardComponent("preference_share")]))
  # answer-1 counts 1, 2, 1, 0 (normalised 0.5, 1, 0.5, 0); shares 1, 1, 0.5, 0; accuracy constant
  np.testing.assert_allclose(counts, [0.5, 1.0, 0.5, 0.0])
  np.testing.assert_allclose(shares, [1.0, 1.0, 0.5, 0.0])


def test_preference_skips_constant_features_and_groups_are_separate():
  same = [episode(5, 1.0, [("answer-2", 0.001, 1.0)]), episode(5, 1.0, [("answer-2", 0.001, 1.0)])]
  other = [episode(6, 1.0, [("answer-1", 0.5, 9.0)]), episode(6, 0.0, [])]
  total, _ = compute_rewards(same + other, RewardConfig([RewardComponent("preference")]))
  # group 5: every feature equal -> all skipped -> 0; group 6: the correct one is best on accuracy
  # (normalised 1) and worst on cost/latency (0) and used answer-1 once (weight 0)
  np.testing.assert_allclose(total, [0.0, 0.0, 1.0, 0.0])


def test_composite_sum_product_and_user_function():
  group = [episode(0, 1.0, [("a", 0.01, 100.0)]), episode(0, 0.0, [("a", 0.0, 0.0)])]
  sum_config = RewardConfig([RewardComponent("outcome", 1.0), RewardComponent("efficiency", 0.5)])
  total, parts = compute_rewards(group, sum_config)
  np.testing.assert_allclose(total, [1.0 + 0.375, 0.0])
  assert set(parts) == {"outcome", "efficiency"}
  product = RewardConfig([RewardComponent("outcome"), RewardComponent("efficiency")], combine="product")
  np.testing.assert_allclose(compute_rewards(group, product)[0], [0.75, 0.0])
  user = RewardConfig([RewardComponent("tests.rl.test_rewards:turn_penalty", 1.0)])
  np.testing.assert_allclose(compute_rewards(group, user)[0], [-1.0, 0.0])
  with pytest.raises(ConfigError, match="unknown reward 'speed'"):
    compute_rewards(group, RewardConfig([RewardComponent("speed")]))
  with pytest.raises(ConfigError, match="rewards.combine must be"):
    RewardConfig(combine="max")


def turn_penalty(trajectory, group):
  """A user reward loaded by module:attr: minus the number of tool calls."""
  return -float(len([c for c in trajectory.calls if c.cost_usd]))


def test_utility_reads_the_episode_alone_on_the_preferences_fixed_scale():
  scaled = {"name": "balanced", "tools": {}, "accuracy": 1.0, "cost": 0.25, "latency": 0.5,
            "statement": "", "cost_unit": 0.004, "latency_unit": 10.0}
  config = RewardConfig([RewardComponent("utility")])
  alone = [episode(0, 1.0, [("answer-2", 0.002, 4.0)], scaled)]
  beside = alone + [episode(0, 0.0, [("answer-1", 0.02, 30.0)], scaled)]
  total, _ = compute_rewards(alone, config)
  np.testing.assert_allclose(total, [1.0 - 0.25 * 0.5 - 0.5 * 0.4])
  np.testing.assert_allclose(compute_rewards(beside, config)[0], [total[0], 0.0 - 0.25 * 5 - 0.5 * 3])
  # the preference reward of the same episode moves with its neighbours; the utility does not
  assert compute_rewards(alone, RewardConfig([RewardComponent("preference")]))[0][0] != \
      compute_rewards(beside, RewardConfig([RewardComponent("preference")]))[0][0]
  no_preference = episode(0, 1.0, [("answer-1", 0.02, 30.0)], None)
  assert compute_rewards([no_preference], config)[0][0] == 1.0
