"""GRPO on τ² in orchestrator mode with a recorded user: `toolorch train` on the τ² run config,
switched to a simulated user (recorded turns) and to `call_expert` over recorded experts; two
steps. Parametrized by domain: mock with recorded turns, airline with the gold user (each task's
request, then the actions the task assigns the user)."""

import json

import pytest

pytest.importorskip("jetstream", reason="training rollouts need the 'serve' extra and JetStream")

from tests.envs.recorded_experts import write_recorded_experts  # noqa: E402
from toolorch_jax import cli  # noqa: E402
from toolorch_jax.config import config_dir  # noqa: E402

# (domain, who plays the user, split)
DOMAINS = [("mock", ["env.settings.user.kind=scripted", "env.settings.user.script=tau2_mock"],
            "base"),
           ("airline", ["env.settings.user.kind=gold"], "test")]
SHORT = ["train.steps=2", "warmstart.steps=2", "warmstart.demonstrations=8",
         "rollout.tasks_per_step=2", "rollout.group_size=2", "report.samples=1",
         "train.progress=false", "train.tensorboard=false", "rollout.max_context=1536",
         "train.seq_len=1536", "model.tokenizer_vocab=1024"]


@pytest.mark.slow
@pytest.mark.parametrize("domain,user,split", DOMAINS)
def test_two_grpo_steps_in_orchestrator_mode_with_a_recorded_user(tmp_path, domain, user, split):
  toolset = write_recorded_experts(tmp_path)
  env = [f"env.settings.domain={domain}", "env.settings.mode=user", "env.settings.agent=orchestrator",
         f"env.settings.toolset={toolset}", "env.settings.gold_consult=expert-1", *user, f"env.settings.split={split}",
         f"rollout.split={split}", f"report.split={split}"]
  workdir = tmp_path / "run"
  assert cli.main(["train", "--config", str(config_dir() / "tau2_mock.yaml"), "--workdir",
                   str(workdir), *SHORT, *env]) == 0
  metrics = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  assert len(metrics) == 2
  demos = [json.loads(line) for line in
           (workdir / "warmstart" / "demonstrations.jsonl").read_text().splitlines()]
  for demo in demos:  # gold dialogues: greeting, the user's words, the gold calls, the user's stop
    roles = [m["role"] for m in demo["messages"]]
    assert roles[:3] == ["system", "assistant", "user"]
    assert any(t["function"]["name"] == "call_expert" for t in demo["tools"])
    assert demo["messages"][3]["tool_calls"][0]["name"] == "call_expert"  # the gold consults
  report = json.loads((workdir / "report.json").read_text())
  assert report["env"] == "tau2"
