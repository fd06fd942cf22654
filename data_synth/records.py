"""Drafts as τ²-bench `Task` records (tasks.json) and as ToolScale-style JSONL lines."""

from __future__ import annotations

from typing import Any, Mapping

from data_synth.tasks import Draft


def ticket(title: str, draft: Draft) -> str:
  """The user's request in solo mode: each call's ask in order, then the constraints."""
  asks = [step.ask for step in draft.steps]
  text = f"Hello, I am contacting {title}. Please {asks[0]}"
  text += "".join(f"; then {ask}" for ask in asks[1:]) + "."
  return " ".join([text, *(c["message"] for c in draft.constraints)])


def tau2_task(task_id: str, description: Mapping[str, Any], draft: Draft) -> dict[str, Any]:
  """One τ² task: the ticket (solo mode) and the same request as user-simulator instructions;
  gold actions, end-state assertions and what must be said; reward on DB and COMMUNICATE, plus
  ENV_ASSERTION when the task was given constraints."""
  text = ticket(description["title"], draft)
  ids = sorted({str(v) for step in draft.steps for v in step.arguments.values()})
  told = [step.tell for step in draft.steps if step.tell is not None]
  basis = ["DB", "COMMUNICATE"] + (["ENV_ASSERTION"] if draft.constraints else [])
  return {
      "id": task_id,
      "description": {"purpose": f"{description['domain']}: {' -> '.join(draft.intent)}",
                      "relevant_policies": None,
                      "notes": f"evolve depth {len(draft.evolution)}"
                               + (f" ({', '.join(draft.evolution)})" if draft.evolution else "")},
      "user_scenario": {"persona": None, "instructions": {
          "domain": description["domain"],
          "reason_for_call": text,
          "known_info": "You know these ids and values: " + ", ".join(ids) + ".",
          "unknown_info": ("You do not know: " + ", ".join(told) + ".") if told else None,
          "task_instructions": "Ask the agent for everything in your reason for calling, one"
                               " request at a time, and confirm what the agent tells you."}},
      "ticket": text,
      "initial_state": None,
      "evaluation_criteria": {
          "actions": [{"action_id": f"{task_id}_{i}", "requestor": "assistant",
                       "name": step.name, "arguments": step.arguments, "info": step.ask}
                      for i, step in enumerate(draft.steps)],
          "env_assertions": [dict(c) for c in draft.constraints],
          "communicate_info": told,
          "nl_assertions": None,
          "reward_basis": basis},
  }


def toolscale_record(domain: str, task: Mapping[str, Any], tools: list[dict[str, Any]],
                     evolve_depth: int) -> dict[str, Any]:
  """One ToolScale-style line: the τ² task with its domain, its tools' function specs and the
  gold calls as the assistant's turns."""
  calls = task["evaluation_criteria"]["actions"]
  return {"domain": domain, "task": task, "tools": tools, "evolve_depth": evolve_depth,
          "messages": [{"role": "user", "content": task["ticket"]},
                       *({"role": "assistant", "content": "", "tool_calls": [
                           {"name": c["name"], "arguments": c["arguments"]}]} for c in calls),
                       {"role": "assistant",
                        "content": "\n".join(task["evaluation_criteria"]["communicate_info"])}]}


def evolve_depth(task: Mapping[str, Any]) -> int:
  """The evolution steps a task went through, as `tau2_task` notes them."""
  notes = (task.get("description") or {}).get("notes") or ""
  return int(notes.split()[2]) if notes.startswith("evolve depth ") else 0
