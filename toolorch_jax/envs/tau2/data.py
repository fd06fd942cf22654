"""A τ² domain's files from the data directory: the db (`db.json` or `db.toml`), the user's db
where the user has tools, `tasks.json`, the policy, the splits.

Tasks are read into small frozen dataclasses once, so a malformed file fails at load time with the
file, the task id and the field named, not as a KeyError in the middle of scoring.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path
from typing import Any, Mapping

from toolorch_jax.config import ConfigError
from toolorch_jax.datadir import data_file

REWARD_TYPES = ("DB", "ENV_ASSERTION", "ACTION", "COMMUNICATE", "NL_ASSERTION")
DEFAULT_REWARD_BASIS = ("DB", "COMMUNICATE")  # τ²'s default when a task names none
_REQUIRED = object()


@dataclasses.dataclass(frozen=True)
class Action:
  """A gold tool call. `compare_args` None compares every argument the agent passed; () the name."""

  action_id: str
  name: str
  arguments: Mapping[str, Any]
  requestor: str = "assistant"
  compare_args: tuple[str, ...] | None = None

  def matches(self, name: str, arguments: Mapping[str, Any]) -> bool:
    """τ²'s rule: same tool, and the compared arguments equal."""
    if name != self.name or not isinstance(arguments, Mapping):
      return False
    keys = tuple(arguments) if self.compare_args is None else self.compare_args
    return ({k: v for k, v in arguments.items() if k in keys}
            == {k: v for k, v in self.arguments.items() if k in keys})


@dataclasses.dataclass(frozen=True)
class EnvCall:
  """A function run on the environment: an initialisation action, or an end-state assertion."""

  env_type: str  # assistant | user: whose tools it runs on
  func_name: str
  arguments: Mapping[str, Any]
  assert_value: bool = True  # assertions only: the result that counts as met


@dataclasses.dataclass(frozen=True)
class Criteria:
  """`evaluation_criteria`; `actions` and `env_assertions` tell None from empty, as τ² does."""

  actions: tuple[Action, ...] | None
  env_assertions: tuple[EnvCall, ...] | None
  communicate_info: tuple[str, ...]
  reward_basis: tuple[str, ...]
  nl_assertions: tuple[str, ...] = ()  # judged by an LLM, which the reward needs for NL_ASSERTION


@dataclasses.dataclass(frozen=True)
class Tau2Task:
  id: str
  ticket: str | None  # the request in solo mode; tasks without one need a user simulator
  criteria: Criteria | None
  agent_data: Mapping[str, Any] | None  # initial_state.initialization_data.agent_data
  init_actions: tuple[EnvCall, ...]
  message_history: tuple[Mapping[str, Any], ...]
  user_scenario: Mapping[str, Any] | None = None  # persona and instructions of the simulated user
  user_data: Mapping[str, Any] | None = None  # initial_state.initialization_data.user_data


@dataclasses.dataclass(frozen=True)
class DomainData:
  name: str
  db: dict[str, Any]
  policy: str
  tasks: tuple[Tau2Task, ...]
  splits: Mapping[str, tuple[str, ...]]
  user_db: dict[str, Any] | None = None


def _get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str,
         default: Any = _REQUIRED) -> Any:
  """`obj[key]` of type `kind` (null counts as missing); else ConfigError naming `where.key`."""
  value = obj.get(key)
  if value is None:
    if default is _REQUIRED:
      raise ConfigError(f"{where}: missing '{key}'")
    return default
  if not isinstance(value, kind):
    names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
    raise ConfigError(f"{where}.{key}: expected {names}, got {type(value).__name__}")
  return value


def _list(obj: Mapping[str, Any], key: str, where: str) -> list[Any] | None:
  return _get(obj, key, list, where, None)


def _strings(obj: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
  values = _list(obj, key, where) or []
  for i, value in enumerate(values):
    if not isinstance(value, str):
      raise ConfigError(f"{where}.{key}[{i}]: expected str, got {type(value).__name__}")
  return tuple(values)


def _action(raw: Any, where: str) -> Action:
  if not isinstance(raw, Mapping):
    raise ConfigError(f"{where}: expected an object, got {type(raw).__name__}")
  compare = raw.get("compare_args")
  return Action(_get(raw, "action_id", str, where), _get(raw, "name", str, where),
                _get(raw, "arguments", dict, where, {}),
                _get(raw, "requestor", str, where, "assistant"),
                None if compare is None else _strings(raw, "compare_args", where))


def _env_call(raw: Any, where: str) -> EnvCall:
  if not isinstance(raw, Mapping):
    raise ConfigError(f"{where}: expected an object, got {type(raw).__name__}")
  return EnvCall(_get(raw, "env_type", str, where), _get(raw, "func_name", str, where),
                 _get(raw, "arguments", dict, where, {}),
                 _get(raw, "assert_value", bool, where, True))


def _criteria(raw: Mapping[str, Any], where: str) -> Criteria:
  actions = _list(raw, "actions", where)
  assertions = _list(raw, "env_assertions", where)
  basis = _strings(raw, "reward_basis", where) or DEFAULT_REWARD_BASIS
  for i, kind in enumerate(basis):
    if kind not in REWARD_TYPES:
      raise ConfigError(f"{where}.reward_basis[{i}]: unknown reward type '{kind}';"
                        f" one of {REWARD_TYPES}")
  return Criteria(
      None if actions is None else tuple(_action(a, f"{where}.actions[{i}]")
                                         for i, a in enumerate(actions)),
      None if assertions is None else tuple(_env_call(a, f"{where}.env_assertions[{i}]")
                                            for i, a in enumerate(assertions)),
      _strings(raw, "communicate_info", where), basis, _strings(raw, "nl_assertions", where))


def parse_task(raw: Any, where: str) -> Tau2Task:
  """One entry of `tasks.json`; `where` names it in errors (e.g. "tasks.json[3]")."""
  if not isinstance(raw, Mapping):
    raise ConfigError(f"{where}: expected an object, got {type(raw).__name__}")
  task_id = _get(raw, "id", str, where)
  where = f"{where} (id '{task_id}')"
  state = _get(raw, "initial_state", dict, where, {})
  in_state = f"{where}.initial_state"
  init_data = _get(state, "initialization_data", dict, in_state, {})
  init_actions = _list(state, "initialization_actions", in_state) or []
  criteria = _get(raw, "evaluation_criteria", dict, where, None)
  return Tau2Task(
      task_id, _get(raw, "ticket", str, where, None),
      None if criteria is None else _criteria(criteria, f"{where}.evaluation_criteria"),
      _get(init_data, "agent_data", dict, f"{in_state}.initialization_data", None),
      tuple(_env_call(a, f"{in_state}.initialization_actions[{i}]")
            for i, a in enumerate(init_actions)),
      tuple(_list(state, "message_history", in_state) or []),
      _get(raw, "user_scenario", dict, where, None),
      _get(init_data, "user_data", dict, f"{in_state}.initialization_data", None))


def _domain_file(name: str, folder: Path | None, relative: str) -> Path:
  """`relative` in the domain directory `folder`, or in `tau2/domains/<name>/` of the data dir."""
  if folder is None:
    return data_file(f"tau2/domains/{name}/{relative}", "env.settings.domain")
  path = folder / relative
  if not path.is_file():
    raise ConfigError(f"env.settings.domain: file not found: {path}")
  return path


def _read_json(path: Path) -> Any:
  try:
    return json.loads(path.read_text(encoding="utf-8"))
  except (json.JSONDecodeError, UnicodeDecodeError) as err:
    raise ConfigError(f"{path}: not valid JSON: {err}") from None


def read_db(path: Path) -> dict[str, Any]:
  """A domain database, JSON or TOML by its suffix, as one object."""
  if path.suffix != ".toml":
    db = _read_json(path)
  else:
    try:
      db = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
      raise ConfigError(f"{path}: not valid TOML: {err}") from None
  if not isinstance(db, dict):
    raise ConfigError(f"{path}: expected an object, got {type(db).__name__}")
  return db


POLICY_PARTS = ("main_policy", "tech_support_policy")  # τ²'s tags of a policy in two files


def read_policy(paths: list[Path]) -> str:
  """One policy file, or two (telecom's main and tech-support policies) in τ²'s layout: each part
  inside its tag."""
  parts = [path.read_text(encoding="utf-8") for path in paths]
  if len(parts) == 1:
    return parts[0]
  if len(parts) != len(POLICY_PARTS):
    raise ConfigError(f"{paths[0].parent}: a policy is one file, or two joined by '+'")
  return "\n".join(f"<{tag}>\n{text}\n</{tag}>" for tag, text in zip(POLICY_PARTS, parts))


def load_domain(name: str, policy_file: str, db_file: str = "db.json",
                user_db_file: str | None = None, folder: Path | None = None) -> DomainData:
  """`tau2/domains/<name>/` of the data directory, or the domain directory `folder` (e.g. one
  `toolorch synth` wrote); `policy_file` picks e.g. the solo policy ("a.md+b.md": two parts)."""
  where = str(folder) if folder is not None else f"tau2/domains/{name}"
  db = read_db(_domain_file(name, folder, db_file))
  user_db = read_db(_domain_file(name, folder, user_db_file)) if user_db_file else None
  raw_tasks = _read_json(_domain_file(name, folder, "tasks.json"))
  if not isinstance(raw_tasks, list):
    raise ConfigError(f"{where}/tasks.json: expected a JSON list, got {type(raw_tasks).__name__}")
  tasks = tuple(parse_task(raw, f"{where}/tasks.json[{i}]") for i, raw in enumerate(raw_tasks))
  splits = _read_json(_domain_file(name, folder, "split_tasks.json"))
  if not (isinstance(splits, dict) and all(isinstance(ids, list) for ids in splits.values())):
    raise ConfigError(f"{where}/split_tasks.json: expected an object of split name -> task ids")
  policy = read_policy([_domain_file(name, folder, part) for part in policy_file.split("+")])
  return DomainData(name, db, policy, tasks, {split: tuple(ids) for split, ids in splits.items()},
                    user_db)
