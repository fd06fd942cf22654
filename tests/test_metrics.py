"""MetricsWriter: JSONL lines and TensorBoard scalars read back from disk."""

import json
import struct

import jax.numpy as jnp
import numpy as np
import pytest
from tensorboardX.proto import event_pb2
from tensorboardX.record_writer import masked_crc32c

from toolorch_jax.metrics import MetricsWriter, flatten

STEPS = [
    {"reward": {"mean": 0.5, "outcome": 1.0}, "accuracy": 1, "tool_calls/search": np.float32(2.0),
     "train": {"kl": jnp.float32(0.01)}, "step_seconds": 1.5},
    {"reward": {"mean": 0.25, "outcome": 0.0}, "accuracy": False, "tool_calls/search": 0,
     "train": {"kl": float("nan")}, "step_seconds": 1.25},
]


def read_events(directory) -> list[event_pb2.Event]:
  """TFRecord framing: length (u64), its masked CRC-32C, the Event proto, its masked CRC-32C."""
  [path] = directory.iterdir()
  data, events = path.read_bytes(), []
  while data:
    header, data = data[:8], data[8:]
    (length,), (header_crc,) = struct.unpack("<Q", header), struct.unpack("<I", data[:4])
    payload, (payload_crc,) = data[4:4 + length], struct.unpack("<I", data[4 + length:8 + length])
    assert (header_crc, payload_crc) == (masked_crc32c(header), masked_crc32c(payload))
    events.append(event_pb2.Event.FromString(payload))
    data = data[8 + length:]
  return events


def test_jsonl_and_tensorboard_read_back(tmp_path, capsys):
  with MetricsWriter(str(tmp_path), total_steps=2) as writer:
    for step, metrics in enumerate(STEPS, start=1):
      writer.write(step, metrics)

  lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert lines[0] == {"step": 1, "reward/mean": 0.5, "reward/outcome": 1.0, "accuracy": 1.0,
                      "tool_calls/search": 2.0, "train/kl": pytest.approx(0.01), "step_seconds": 1.5}
  assert lines[1]["train/kl"] is None  # NaN: strict JSON keeps it as null
  assert lines[1]["accuracy"] == 0.0

  scalars = {}
  for event in read_events(tmp_path / "tensorboard"):
    for value in event.summary.value:
      scalars[value.tag, event.step] = value.simple_value
  assert scalars[("reward/mean", 1)] == 0.5
  assert scalars[("reward/outcome", 2)] == 0.0
  assert scalars[("tool_calls/search", 1)] == 2.0
  assert scalars[("train/kl", 1)] == pytest.approx(0.01)
  assert np.isnan(scalars[("train/kl", 2)])
  assert len(scalars) == 2 * len(flatten(STEPS[0]))

  bar = capsys.readouterr().err
  assert "2/2" in bar and "reward/mean=0.25" in bar and "accuracy=0" in bar


def test_resume_appends_and_progress_starts_at_the_step(tmp_path, capsys):
  with MetricsWriter(str(tmp_path), total_steps=10, use_tensorboard=False) as writer:
    writer.write(1, {"x": 1.0})
  with MetricsWriter(str(tmp_path), total_steps=10, use_tensorboard=False) as writer:
    writer.write(7, {"x": 7.0})
  steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert steps == [1, 7]
  assert not (tmp_path / "tensorboard").exists()
  assert "7/10" in capsys.readouterr().err


def test_bad_metrics_name_the_key(tmp_path):
  with MetricsWriter(str(tmp_path), total_steps=1, use_tensorboard=False, progress=False) as writer:
    with pytest.raises(TypeError, match="metric 'train/note': expected a number, got str"):
      writer.write(1, {"train": {"note": "hello"}})
    with pytest.raises(TypeError, match="metric 'v': expected a number"):
      writer.write(1, {"v": np.ones(3)})
    with pytest.raises(ValueError, match="'step' is reserved"):
      writer.write(1, {"step": 3})
  assert (tmp_path / "metrics.jsonl").read_text() == ""
