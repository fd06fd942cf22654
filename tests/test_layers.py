"""The package's imports run downward only, in the order of the data path, and never in a circle.

Every import statement counts, those inside functions too (a lazy import is still a dependency).
A module may import its own package and any lower layer; nothing above it and nothing beside it.
"""

import ast
import pathlib

import toolorch_jax

# Lowest first. Beside each other in a layer means independent of each other.
LAYERS = (
    ("config",),  # typed configs from YAML, and ConfigError
    ("datadir", "registry", "distributed"),  # the data directory; names YAML may use for objects;
    # joining a multi-host job
    ("data", "metrics"),  # task records, readers and streams; the metrics writer
    ("model", "tools"),  # the Qwen3 model; the tool contract and the tools
    ("tokenizer", "checkpoint"),  # tokenizers, chat template, tool-call parser; orbax checkpoints
    ("serving", "envs"),  # the JetStream engine and servers; environments
    ("rollout",),  # the episode loop, policies, trajectories, the Rollout
    ("rewards",),
    ("rl",),  # GRPO, SFT, the trainer, the run pipeline and report
    ("cli",),  # the toolorch command
)
ROOT = "toolorch_jax"


def module_name(path: pathlib.Path, package_dir: pathlib.Path) -> str:
  parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package_dir: pathlib.Path, root: str | None = None) -> dict[str, set[str]]:
  """Module -> the modules of package `root` (default: this package) it imports (a name imported
  from a package that is itself a submodule counts as that submodule)."""
  root = root or package_dir.name
  files = {module_name(p, package_dir): p for p in package_dir.rglob("*.py")}
  graph = {}
  for name, path in files.items():
    is_package = path.name == "__init__.py"
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      if isinstance(node, ast.Import):
        targets.update(alias.name for alias in node.names)
      elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
          anchor = name.split(".")[:len(name.split(".")) - node.level + is_package]
          base = ".".join(anchor + ([base] if base else []))
        for alias in node.names:
          targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base)
    graph[name] = {t for t in targets if t == root or t.startswith(root + ".")}
  return graph


def layer_of(module: str) -> str:
  """The layer a module belongs to: its first name under the package."""
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else ""


def upward_imports(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
  rank = {name: i for i, names in enumerate(layers) for name in names}
  found = []
  for module, targets in sorted(graph.items()):
    mine = layer_of(module)
    for target in sorted(targets):
      theirs = layer_of(target)
      if theirs and theirs != mine and not rank[theirs] < rank[mine]:
        found.append(f"{module} imports {target} ({mine} is not above {theirs})")
  return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """Strongly connected groups of more than one module (or a module importing itself)."""
  index, low, stack, on_stack, groups = {}, {}, [], set(), []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for nxt in graph.get(node, ()):
      if nxt not in index:
        visit(nxt)
        low[node] = min(low[node], low[nxt])
      elif nxt in on_stack:
        low[node] = min(low[node], index[nxt])
    if low[node] == index[node]:
      group = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        group.append(member)
        if member == node:
          break
      if len(group) > 1 or node in graph.get(node, ()):
        groups.append(sorted(group))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return groups


PACKAGE = pathlib.Path(toolorch_jax.__file__).parent
# data_synth/ (ToolScale synthesis) is a top-level package beside this one: it may import any of
# toolorch_jax but its cli, and only toolorch_jax's cli may import it.
SYNTH = PACKAGE.parent / "data_synth"


def test_every_part_of_the_package_has_a_layer():
  placed = {name for names in LAYERS for name in names}
  parts = {layer_of(m) for m in import_graph(PACKAGE)} - {""}
  assert parts == placed, f"unplaced: {parts - placed}; listed but missing: {placed - parts}"


def test_imports_run_downward_only():
  assert upward_imports(import_graph(PACKAGE)) == []


def test_no_import_cycles():
  assert cycles(import_graph(PACKAGE)) == []


def test_the_checks_catch_an_upward_import_and_a_cycle(tmp_path):
  package = tmp_path / ROOT
  for name, text in {
      "__init__.py": "",
      "config.py": "from toolorch_jax.rl import trainer\n",  # upward
      "rl/__init__.py": "",
      "rl/trainer.py": "def f():\n  from . import report\n",  # lazy, relative
      "rl/report.py": "import toolorch_jax.rl.trainer\n",  # closes the circle
  }.items():
    (package / name).parent.mkdir(parents=True, exist_ok=True)
    (package / name).write_text(text)
  graph = import_graph(package)
  layers = (("config",), ("rl",))
  assert upward_imports(graph, layers) == [
      "toolorch_jax.config imports toolorch_jax.rl.trainer (config is not above rl)"]
  assert cycles(graph) == [["toolorch_jax.rl.report", "toolorch_jax.rl.trainer"]]


def test_data_synth_sits_above_every_layer_but_cli():
  imports_synth = import_graph(PACKAGE, "data_synth")
  assert sorted(m for m, targets in imports_synth.items() if targets and layer_of(m) != "cli") == []
  assert any(imports_synth[m] for m in imports_synth if layer_of(m) == "cli")  # `toolorch synth`
  synth_imports = import_graph(SYNTH, ROOT)
  assert any(synth_imports.values())
  assert sorted(f"{m} imports {t}" for m, ts in synth_imports.items() for t in ts
                if layer_of(t) == "cli") == []
