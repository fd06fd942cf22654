"""The `code_interpreter` tool: model-written Python, run in the sandbox, billed per second."""

from __future__ import annotations

import signal
from typing import Any

from toolorch_jax.tools.base import Tool, ToolContext, ToolError, ToolResult
from toolorch_jax.tools.sandbox import SandboxConfig, SandboxRun, SandboxUnavailable, run_python


def _failure(run: SandboxRun, config: SandboxConfig) -> str | None:
  """Why the run did not end cleanly, in words the policy can act on; None when it did."""
  if run.timed_out:
    return f"wall-clock timeout after {config.timeout_s:g} s; the process group was killed"
  if run.signal is not None:
    name = signal.Signals(run.signal).name if run.signal in signal.valid_signals() else run.signal
    why = f" (CPU time limit of {config.cpu_s} s)" if run.signal == signal.SIGXCPU else ""
    return f"killed by {name}{why}"
  if run.exit_code:
    last = run.stderr.strip().splitlines()[-1:] or [""]
    return f"exit status {run.exit_code}" + (f": {last[0]}" if last[0] else "")
  return None


class CodeInterpreter(Tool):
  """Runs a Python program and returns what it printed (stdout, then stderr with tracebacks)."""

  Settings = SandboxConfig
  description = ("Run a self-contained Python 3 program and return its standard output and"
                 " standard error. No network; files written are discarded after the run.")
  parameters = {"type": "object", "properties": {
      "code": {"type": "string", "minLength": 1, "description": "the complete Python program"}},
      "required": ["code"], "additionalProperties": False}

  async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    try:
      run = await run_python(arguments["code"], self.settings)
    except SandboxUnavailable as err:
      raise ToolError(str(err), metadata={"isolation": None}) from None
    if run.setup_error:
      raise ToolError(f"sandbox failed to start the code: {run.setup_error}",
                      metadata=run.metadata())
    text = run.stdout
    if run.stderr:
      text += ("\n" if text and not text.endswith("\n") else "") + f"[stderr]\n{run.stderr}"
    return ToolResult(text=text, cost_usd=self.price.cost(seconds=run.wall_s),
                      error=_failure(run, self.settings), metadata=run.metadata())
