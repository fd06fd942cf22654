"""Stage bookkeeping: an on-disk cache per stage, and a ledger of calls, tokens and dollars.

Each stage's result is stored as `DIR/.cache/<domain>/<stage>.json` with the hash of everything it
was computed from (its inputs and the results it builds on); a rerun loads a stage whose hash is
unchanged and recomputes the rest, so editing one domain's description redoes only that domain,
and an interrupted run resumes after the last stage it finished. Files are written to a temporary
name and renamed, so an interruption never leaves half a file.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable


def digest(*parts: Any) -> str:
  text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
  return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def write_atomic(path: Path, text: str) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_name(path.name + ".tmp")
  tmp.write_text(text, encoding="utf-8")
  os.replace(tmp, path)


@dataclasses.dataclass
class Usage:
  """What a stage spent: LLM calls, tokens, dollars, repairs (retries after an error)."""

  calls: int = 0
  input_tokens: int = 0
  output_tokens: int = 0
  cost_usd: float = 0.0
  repairs: int = 0
  dropped: int = 0  # answers (or entries, tools) dropped after the repairs
  reused: int = 0  # answers read back from an earlier, interrupted run instead of asked again
  cached: bool = False


class Ledger:
  """Per (domain, stage) usage; cached stages keep the usage they had when computed."""

  def __init__(self):
    self.usage: dict[tuple[str, str], Usage] = collections.defaultdict(Usage)

  def add(self, domain: str, stage: str, **amounts: float) -> None:
    usage = self.usage[(domain, stage)]
    for name, amount in amounts.items():
      setattr(usage, name, getattr(usage, name) + amount)

  def rows(self) -> list[dict[str, Any]]:
    return [{"domain": d, "stage": s, **dataclasses.asdict(u)} for (d, s), u in self.usage.items()]


class StageCache:
  def __init__(self, root: Path, ledger: Ledger):
    self.root, self.ledger = root, ledger

  def run(self, domain: str, stage: str, key: str, compute: Callable[[], Any]) -> Any:
    """`compute()`, or its stored value when `key` matches what was stored for the stage. The
    usage of the stage and of its parts (`stage:part`, e.g. `environment:schema`) is stored with
    it and restored, marked cached."""
    path = self.root / domain / f"{stage}.json"
    if path.is_file():
      stored = json.loads(path.read_text(encoding="utf-8"))
      if stored.get("key") == key:
        for name, amounts in stored.get("usage", {}).items():
          self.ledger.usage[(domain, name)] = Usage(**{**amounts, "cached": True})
        return stored["value"]
    self.ledger.usage[(domain, stage)] = Usage()
    value = compute()
    usage = {name: dataclasses.asdict(u) for (d, name), u in self.ledger.usage.items()
             if d == domain and (name == stage or name.startswith(stage + ":"))}
    write_atomic(path, json.dumps({"key": key, "usage": usage, "value": value},
                                  ensure_ascii=False))
    return value
