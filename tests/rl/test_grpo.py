"""GRPO advantages and filters against the published conventions and hand-computed cases."""

import warnings

import numpy as np
import pytest

from toolorch_jax.rollout.trajectory import ToolCallRecord, Trajectory
from toolorch_jax.rl.grpo import GRPOConfig, group_advantages, weigh_and_filter


def test_published_conventions():
  adv, keep = group_advantages([1, 0, 0, 1], [0, 0, 0, 0])
  # sqrt(3)/2 = 0.8660254; the +1e-6 in the denominator moves it by 1.5e-6
  np.testing.assert_allclose(adv, [0.866025, -0.866025, -0.866025, 0.866025], atol=2e-6)
  exact, _ = group_advantages([1, 0, 0, 1], [0, 0, 0, 0], eps=0.0)
  np.testing.assert_allclose(exact, np.array([1, -1, -1, 1]) * np.sqrt(3) / 2, rtol=1e-12)
  assert keep.all()
  adv, _ = group_advantages([1, 0, 0, 0], [0, 0, 0, 0])
  np.testing.assert_allclose(adv, [1.5, -0.5, -0.5, -0.5], atol=1e-5)
  adv, keep = group_advantages([0.7, 0.7, 0.7], [3, 3, 3])
  np.testing.assert_array_equal(adv, [0, 0, 0])
  assert not keep.any()  # std 0 <= 0.1: dropped


def test_groups_are_independent_and_clipped():
  rewards = [10.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]
  groups = [0] * 10 + [1, 1]
  adv, keep = group_advantages(rewards, groups)
  # group 0: mean 1, sample std sqrt(90/9)=3.162: first = 9/3.162 = 2.846 (no clip), others -0.316
  np.testing.assert_allclose(adv[:2], [9 / np.sqrt(10), -1 / np.sqrt(10)], rtol=1e-5)
  # group 1: [1, 2] -> std 0.7071 -> +-0.7071
  np.testing.assert_allclose(adv[10:], [-0.70710, 0.70710], atol=1e-5)
  adv, _ = group_advantages([100.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [0] * 12, clip=3.0)
  assert adv[0] == 3.0  # 100 -> (100-8.33)/28.87 = 3.175, clipped
  adv, keep = group_advantages([0.05, 0.0], [0, 0], min_std=0.1)
  assert not keep.any()  # std 0.035
  adv, keep = group_advantages([0.05, 0.0], [0, 0], min_std=None, clip=None)
  assert keep.all() and adv[0] > 0
  adv, keep = group_advantages([1.0], [7])
  assert adv[0] == 0 and not keep[0]  # a lone sample has no group to compare with


def trajectory(group, finish="env", errors=(None,), versions=(3,)):
  calls = [ToolCallRecord(0, "t", {}, "", e, 0.0, 0.0) for e in errors]
  return Trajectory("task", group, "e", calls=calls, finish=finish, policy_versions=list(versions))


def test_filters_invalid_stale_and_bonus():
  trajectories = [trajectory(0), trajectory(0, finish="max_turns"), trajectory(0, errors=("boom",)),
                  trajectory(0, errors=()), trajectory(0, versions=(1,))]
  rewards = np.array([1.0, 0.0, 0.0, 0.0, 1.0])
  adv, keep, counts = weigh_and_filter(trajectories, rewards, GRPOConfig(max_staleness=1, tis_cap=2.0), trainer_version=3)
  assert keep.tolist() == [True, False, False, False, False]
  assert counts == {"filtered/low_std": 0.0, "filtered/invalid": 3.0, "filtered/stale": 1.0}
  bonus, _, _ = weigh_and_filter(trajectories, rewards, GRPOConfig(success_bonus=0.1, drop_invalid=False), 3)
  np.testing.assert_allclose(bonus - adv, [0.1, 0, 0, 0, 0.1])


@pytest.mark.parametrize("n", [2, 3, 8])
def test_advantages_have_zero_mean_and_unit_sample_std_before_clipping(n):
  rng = np.random.default_rng(n)
  rewards = rng.normal(size=n)
  adv, _ = group_advantages(rewards, [0] * n, clip=None, min_std=None, eps=0.0)
  assert abs(adv.mean()) < 1e-9 and abs(adv.std(ddof=1) - 1) < 1e-9


def test_unscaled_advantages_keep_the_reward_gaps_of_each_group():
  # Dr. GRPO (Liu et al., 2025): A = r - mean(r), so a group whose rewards differ only by a price
  # of 0.2 pushes a fifth as hard as one whose answers differ in being right.
  rewards = [0.8, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0]
  adv, keep = group_advantages(rewards, [0, 0, 0, 0, 1, 1, 1, 1], clip=None, min_std=None,
                               scale_by_std=False)
  np.testing.assert_allclose(adv, [-0.15, 0.05, 0.05, 0.05, 0.5, -0.5, -0.5, 0.5])
  assert keep.all()
  scaled, _ = group_advantages(rewards, [0, 0, 0, 0, 1, 1, 1, 1], clip=None, min_std=None)
  np.testing.assert_allclose(scaled[:4], np.array([-1.5, 0.5, 0.5, 0.5]), rtol=1e-5)
  np.testing.assert_allclose(scaled[4:], np.array([0.5, -0.5, -0.5, 0.5]) / np.std([1, 0, 0, 1], ddof=1), rtol=1e-5)


def test_running_ahead_without_the_importance_correction_warns():
  with pytest.warns(UserWarning, match="grpo.tis_cap"):
    GRPOConfig(max_staleness=1)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    GRPOConfig(max_staleness=1, tis_cap=2.0)
    GRPOConfig()
