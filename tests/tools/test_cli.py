"""`toolorch tools list` and `toolorch tools call`, as a user runs them."""

import csv
import json

from toolorch_jax.cli import main
from toolorch_jax.datadir import data_path


def run(capsys, *argv):
  code = main(["tools", *argv])
  out, err = capsys.readouterr()
  return code, out, err


def test_list(capsys):
  code, out, _ = run(capsys, "list")
  assert code == 0
  assert out.startswith(
      "python  [CodeInterpreter; $8.3e-06 per second; backend sandbox, at most 2 at once]")
  assert "    arguments (* = required): query* (string), top_k (integer)" in out
  assert "answer-1 | $10 | $30" in out
  code, out, _ = run(capsys, "list", "--schemas", "--config", "toolorchestra")
  names = [spec["function"]["name"] for spec in json.loads(out)]
  assert code == 0 and names == ["answer", "enhance_reasoning", "search", "python", "web_search",
                                 "local_search"]


def test_call_prints_the_tool_result(capsys, tmp_path):
  code, out, _ = run(capsys, "call", "python", "--args", '{"code": "print(2 ** 10)"}')
  result = json.loads(out)
  assert code == 0 and result["text"] == "1024\n" and result["error"] is None
  assert set(result) == {"text", "cost_usd", "latency_s", "error", "metadata"}
  assert result["metadata"]["isolation"] in ("namespaces", "bwrap")
  code, out, _ = run(capsys, "call", "search", "--args", '{"query": "Pavia Cathedral dome"}',
                     "--set", f"tools.search.settings.index_dir={tmp_path}")
  assert code == 0 and json.loads(out)["metadata"]["passages"][0]["id"] in ("4", "5")
  with open(data_path("routellm/gsm8k_responses.csv"), newline="", encoding="utf-8") as f:
    prompt = next(csv.DictReader(f))["prompt"]
  arguments = json.dumps({"model": "answer-2", "prompt": prompt})
  code, out, _ = run(capsys, "call", "answer", "--args", arguments)
  result = json.loads(out)
  assert code == 0 and result["metadata"]["correct"] is True and result["text"].endswith("#### 18")


def test_call_errors(capsys):
  code, out, _ = run(capsys, "call", "python", "--args", '{"cod": "print(1)"}')
  assert code == 1
  assert json.loads(out)["error"] == "bad arguments for 'python': 'code' is a required property"
  code, out, _ = run(capsys, "call", "python", "--args", '{"code": "import time; time.sleep(5)"}',
                     "--timeout", "0.5")
  assert code == 1 and json.loads(out)["error"] == "timed out after 0.5 s (caller's deadline)"
  code, out, _ = run(capsys, "call", "python", "--args", '{"code": "import time; time.sleep(5)"}',
                     "tools.python.settings.timeout_s=0.5")  # the override syntax of every command
  assert code == 1 and "0.5" in json.loads(out)["error"]
  code, _, err = run(capsys, "list", "--config", "nope")
  assert code == 2 and err.startswith("toolorch tools: error: unknown tool set 'nope'")
