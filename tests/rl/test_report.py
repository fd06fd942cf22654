"""The report's per-profile summary counts the episodes the environment did not end."""

from toolorch_jax.envs import EnvConfig, build_env
from toolorch_jax.rl.report import _markdown, _profile_summary
from toolorch_jax.rollout.trajectory import EpisodeEnd, Trajectory


def test_unfinished_episodes_are_counted_by_how_they_ended():
  env = build_env(EnvConfig(name="routing"))
  ends = [EpisodeEnd.ENV, EpisodeEnd.CONTEXT, EpisodeEnd.CONTEXT, EpisodeEnd.TRUNCATED]
  trajectories = [Trajectory(task_id=f"t{i}", group_id=0, episode_id=str(i), finish=end)
                  for i, end in enumerate(ends)]
  summary = _profile_summary(env, trajectories, [0.0] * len(ends), env.profiles()[0])
  assert summary["unfinished"] == {"context": 2, "truncated": 1}
  report = {"env": "routing", "wall_seconds": 1.0, "peak_memory_mib": 1.0, "baselines": {},
            "targets": {}, "before": {"p": summary}, "after": {"p": summary}}
  assert "| 4 | context 2, truncated 1 |" in _markdown(report)
