"""Tool sets from YAML: user tools by module:attr, aliases, limits, and errors that name the key."""

import asyncio
import textwrap

import pytest

from tests.tools.sample_tools import Slow
from toolorch_jax.config import ConfigError
from toolorch_jax.tools import load_toolset, register_tool
from toolorch_jax.tools.registry import TOOL_TYPES

ECHO = "tests.tools.sample_tools:Echo"


def write(tmp_path, text):
  path = tmp_path / "tools.yaml"
  path.write_text(textwrap.dedent(text))
  return path


def test_user_tool_by_module_attr(tmp_path):
  path = write(tmp_path, f"""
      tools:
        shout:
          type: {ECHO}
          description: Repeat after me.
          price: {{per_call: 0.002}}
          settings: {{prefix: ">> ", repeat: 2}}
      """)
  toolset = load_toolset(str(path))
  result = asyncio.run(toolset.call("shout", {"text": "hey"}))
  assert (result.text, result.cost_usd, result.error) == (">> heyhey", 0.002, None)
  assert toolset.schemas()[0]["function"]["description"] == "Repeat after me."
  unknown = asyncio.run(toolset.call("whisper", {"text": "hey"}))
  assert unknown.error == "unknown tool 'whisper' (tools: shout)"


def test_registered_name_and_overrides(tmp_path, monkeypatch):
  monkeypatch.setattr(TOOL_TYPES, "_targets", dict(TOOL_TYPES._targets))
  register_tool("echo", ECHO)
  path = write(tmp_path, "tools:\n  e: {type: echo}\n")
  toolset = load_toolset(str(path), ["tools.e.settings.prefix=pre-"])
  assert asyncio.run(toolset.call("e", {"text": "x"})).text == "pre-x"


def test_backends_limit_concurrency(tmp_path):
  path = write(tmp_path, """
      tools:
        a: {type: "tests.tools.sample_tools:Slow", backend: shared}
        b: {type: "tests.tools.sample_tools:Slow", backend: shared}
      backends:
        shared: {max_concurrency: 3}
      """)
  toolset = load_toolset(str(path))

  async def many():
    return await asyncio.gather(*(toolset.call("ab"[i % 2], {"text": "x"}) for i in range(9)))

  Slow.most = 0
  asyncio.run(many())
  assert Slow.most == 3


def test_shipped_tool_sets_load():
  local = load_toolset("local")
  assert list(local) == ["python", "search", "answer"]
  orchestra = load_toolset("toolorchestra")
  assert list(orchestra) == ["answer", "enhance_reasoning", "search", "python", "web_search",
                             "local_search"]
  # ToolOrchestra's aliases and prices (evaluation/eval_frames.py).
  for alias, model, price in [("answer-1", "gpt-5", (1.25, 10.0)),
                              ("answer-2", "gpt-5-mini", (0.25, 2.0)),
                              ("answer-math-2", "Qwen/Qwen2.5-Math-7B-Instruct", (0.2, 0.2)),
                              ("reasoner-3", "Qwen/Qwen2.5-Coder-32B-Instruct", (0.8, 0.8))]:
    spec = orchestra.models.resolve(alias)
    assert (spec.model, (spec.price.per_mtok_input, spec.price.per_mtok_output)) == (model, price)
  enum = orchestra["answer"].parameters["properties"]["model"]["enum"]
  assert enum == ["answer-1", "answer-2", "answer-3", "answer-4", "answer-math-1", "answer-math-2"]
  assert orchestra.limits.cap("openai") == 16
  assert orchestra["answer"].backend_for({"model": "answer-1"}) == "openai"


SAMPLE = "tests.tools.sample_tools"
LLM_MODELS = 'models:\n  gpt-5: {base_url: "http://127.0.0.1:9/v1"}\naliases: {answer-1: gpt-5}\n'
BAD_CONFIGS = {  # case: (YAML, what the error must say)
    "unknown top-level key": ("toolz: {}", r"unknown key 'toolz'"),
    "unknown tool key": (f"tools:\n  e: {{type: {ECHO}, setings: {{}}}}",
                         r"unknown key 'tools.e.setings'"),
    "missing type": ("tools:\n  e: {description: x}",
                     r"missing mandatory value: type \(key 'tools.e.type'\)"),
    "unknown type": ("tools:\n  e: {type: nope}",
                     r"tools.e.type: unknown tool type 'nope' \(registered: bm25_search"),
    "no such module": ("tools:\n  e: {type: 'no_such_module:Tool'}",
                       r"tools.e.type: cannot import module 'no_such_module'"),
    "no such attr": (f"tools:\n  e: {{type: '{SAMPLE}:Nope'}}",
                     rf"tools.e.type: module '{SAMPLE}' has no attribute 'Nope'"),
    "not a tool": (f"tools:\n  e: {{type: '{SAMPLE}:NOT_A_TOOL'}}",
                   rf"tools.e.type: '{SAMPLE}:NOT_A_TOOL' is 42, not a Tool subclass"),
    "unknown setting": (f"tools:\n  e: {{type: {ECHO}, settings: {{prefx: x}}}}",
                        r"tools.e.settings: unknown key 'prefx'"),
    "setting of wrong type": (f"tools:\n  e: {{type: {ECHO}, settings: {{repeat: many}}}}",
                              r"tools.e.settings: bad value for key 'repeat'"),
    "setting out of range": ("tools:\n  py: {type: code_interpreter, settings: {timeout_s: 0}}",
                             r"tools.py.settings: timeout_s must be > 0, got 0"),
    "negative price": (f"tools:\n  e: {{type: {ECHO}, price: {{per_call: -1}}}}",
                       r"tools.e.price.per_call must be >= 0, got -1"),
    "price of wrong type": (f"tools:\n  e: {{type: {ECHO}, price: {{per_call: cheap}}}}",
                            r"bad value for key 'tools.e.price.per_call'"),
    "alias to unknown model": ("aliases: {answer-1: gpt-9}",
                               r"aliases.answer-1: unknown model 'gpt-9'"),
    "unknown model alias": (
        LLM_MODELS + "tools:\n  ask: {type: llm_expert, settings: {models: [answer-1, answer-9]}}",
        r"tools.ask: settings.models\[1\]: unknown model or alias 'answer-9'"),
    "model not served": (
        "models: {m: {}}\ntools:\n  ask: {type: llm_expert, settings: {models: [m]}}",
        r"tools.ask: settings.models\[0\]: model 'm' has no base_url"),
    "no models": ("tools:\n  ask: {type: llm_expert}",
                  r"tools.ask: settings.models: list at least one"),
    "unused backend": (f"tools:\n  e: {{type: {ECHO}}}\nbackends: {{sandbx: {{max_concurrency: 2}}}}",
                       r"backends.sandbx: no tool or model uses this backend \(in use: e\)"),
    "zero concurrency": (
        f"tools:\n  e: {{type: {ECHO}, backend: b}}\nbackends: {{b: {{max_concurrency: 0}}}}",
        r"backends.b.max_concurrency must be >= 1, got 0"),
    "tools as a list": (f"tools:\n  - {{type: {ECHO}}}",
                        r"'tools' must be a mapping of name to entry"),
    "tool as a string": (f"tools:\n  e: {ECHO}", r"'tools.e' must be a mapping"),
    "invalid schema": (f"tools:\n  e: {{type: '{SAMPLE}:BadSchema'}}",
                       r"tools.e: parameters is not a valid JSON schema: 'objekt' is not valid"),
    "constructor fails": (f"tools:\n  e: {{type: '{SAMPLE}:Fussy'}}",
                          rf"tools.e: cannot build {SAMPLE}:Fussy: ValueError: needs a licence"),
    "corpus missing": ("tools:\n  s: {type: bm25_search, settings: {corpus: /nonexistent.jsonl}}",
                       r"tools.s: settings.corpus: file not found: /nonexistent.jsonl"),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_bad_config_names_the_key(tmp_path, case):
  text, message = BAD_CONFIGS[case]
  path = write(tmp_path, text + "\n")
  with pytest.raises(ConfigError, match=message) as err:
    load_toolset(str(path))
  assert str(err.value).startswith(str(path))


def test_unknown_tool_set_and_bad_override():
  with pytest.raises(ConfigError, match="unknown tool set 'nope'; known: local, tau2_experts, toolorchestra"):
    load_toolset("nope")
  with pytest.raises(ConfigError, match="bad value for key 'tools.python.settings.timeout_s'|"
                                        "tools.python.settings: bad value for key 'timeout_s'"):
    load_toolset("local", ["tools.python.settings.timeout_s=soon"])
