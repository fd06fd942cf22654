"""A synthesised domain trains: 2 GRPO steps through `toolorch train` on the tau2_mock run with
`env.settings.domain` pointing at the generated directory."""

import json

import pytest

pytest.importorskip("jetstream", reason="training rollouts need the 'serve' extra and JetStream")

from data_synth.pipeline import SynthConfig, synthesize  # noqa: E402
from toolorch_jax import cli  # noqa: E402
from toolorch_jax.config import config_dir  # noqa: E402

SHORT = ["train.steps=2", "warmstart.steps=2", "warmstart.demonstrations=8",
         "rollout.tasks_per_step=2", "rollout.group_size=4", "report.samples=1", "report.tasks=4",
         "train.progress=false", "train.tensorboard=false", "rollout.max_turns=3",
         "rollout.max_context=1024", "train.seq_len=1024"]


@pytest.mark.slow  # about 80 s on 2 cores
def test_two_grpo_steps_on_a_generated_domain(tmp_path, small_description):
  synthesize(SynthConfig(out=tmp_path / "synth", tasks=8, domains=(str(small_description),),
                         progress=False))
  domain = tmp_path / "synth" / "notes"
  run = tmp_path / "run"
  assert cli.main(["train", "--config", str(config_dir() / "tau2_mock.yaml"), "--workdir",
                   str(run), f"env.settings.domain={domain}", "env.settings.split=train",
                   "rollout.split=train", "report.split=test", *SHORT]) == 0
  metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
  assert len(metrics) == 2
  report = json.loads((run / "report.json").read_text())
  assert report["env"] == "tau2"
