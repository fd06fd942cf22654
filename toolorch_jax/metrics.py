"""Training metrics: one JSON line per step, TensorBoard scalars and a terminal progress bar.

`workdir/metrics.jsonl` is the record scripts read (`{"step": 3, "reward/mean": 0.5, ...}`,
appended to on resume, so a step re-run after a restore appears twice: the last line wins);
`workdir/tensorboard/` is for watching a run live. Only process 0 writes.
"""

from __future__ import annotations

import json
import math
import numbers
from pathlib import Path
from typing import Any, Mapping, Sequence

import jax
import numpy as np
import tqdm

# Shown on the progress bar when present, in this order.
PROGRESS_KEYS = ("reward/mean", "accuracy", "cost_usd", "train/loss", "sft/loss", "step_seconds")


def flatten(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
  """Nested dicts become '/'-joined keys; every value must be a real number (a Python, NumPy or
  0-d JAX scalar; bools count as 0/1)."""
  flat = {}
  for key, value in metrics.items():
    name = f"{prefix}{key}"
    if isinstance(value, Mapping):
      flat.update(flatten(value, f"{name}/"))
      continue
    if isinstance(value, (np.ndarray, np.generic, jax.Array)) and value.ndim == 0:
      value = value.item()
    if not isinstance(value, numbers.Real):
      raise TypeError(f"metric '{name}': expected a number, got {type(value).__name__} {value!r:.80}")
    flat[name] = float(value)
  return flat


class MetricsWriter:
  """Writes each step's metrics to `workdir/metrics.jsonl`, TensorBoard and a tqdm bar."""

  def __init__(self, workdir: str, total_steps: int, use_tensorboard: bool = True,
               progress: bool = True, progress_keys: Sequence[str] = PROGRESS_KEYS):
    self.workdir = Path(workdir)
    self.total_steps = total_steps
    self.progress_keys = tuple(progress_keys)
    self._enabled = jax.process_index() == 0
    self._progress = progress
    self._bar: tqdm.tqdm | None = None
    self._jsonl = None
    self._tensorboard = None
    if not self._enabled:
      return
    self.workdir.mkdir(parents=True, exist_ok=True)
    self._jsonl = (self.workdir / "metrics.jsonl").open("a", encoding="utf-8")
    if use_tensorboard:
      import tensorboardX  # imported here: the rest of the package never needs it

      self._tensorboard = tensorboardX.SummaryWriter(str(self.workdir / "tensorboard"), flush_secs=10)

  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    """Records one step. Non-finite values go to TensorBoard as they are and into the JSONL as
    null, which keeps every line strict JSON."""
    flat = flatten(metrics)
    if "step" in flat:
      raise ValueError("metric 'step' is reserved for the step number")
    if not self._enabled:
      return
    record = {"step": step, **{k: v if math.isfinite(v) else None for k, v in flat.items()}}
    self._jsonl.write(json.dumps(record, allow_nan=False) + "\n")
    self._jsonl.flush()
    if self._tensorboard is not None:
      for key, value in flat.items():
        self._tensorboard.add_scalar(key, value, step)
    if self._progress:
      self._show(step, flat)

  def _show(self, step: int, flat: dict[str, float]) -> None:
    if self._bar is None:  # created at the first step written, so a resumed run's rate is right
      self._bar = tqdm.tqdm(total=self.total_steps, initial=max(step - 1, 0), unit="step",
                            dynamic_ncols=True)
    self._bar.set_postfix({k: f"{flat[k]:.4g}" for k in self.progress_keys if k in flat}, refresh=False)
    self._bar.update(step - self._bar.n)

  def close(self) -> None:
    for handle in (self._jsonl, self._tensorboard, self._bar):
      if handle is not None:
        handle.close()
    self._jsonl = self._tensorboard = self._bar = None

  def __enter__(self) -> "MetricsWriter":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
