"""A recorded-expert tool set for τ²'s orchestrator mode offline: a small table of answers
(`recorded_expert` reads the answer to the last message of what it is asked)."""

import csv

from toolorch_jax.envs.tau2.orchestrator import GOLD_QUESTION

QUESTION = "May I create a task for user_1 without asking for a description?"
ADVICE = "Yes: the policy only requires a title."
GOLD_ADVICE = "Check the request against the policy, make the calls it allows, then confirm."


def write_recorded_experts(folder) -> str:
  """Writes the table and a tool set naming it; returns the tool set's path."""
  table = folder / "experts.csv"
  with table.open("w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["prompt", "gpt-5", "gpt-5_response", "qwen3-32b", "qwen3-32b_response"])
    writer.writerow([QUESTION, "True", ADVICE, "True", "Yes."])
    writer.writerow([GOLD_QUESTION, "True", GOLD_ADVICE, "True", "Follow the policy."])
  path = folder / "recorded_experts.yaml"
  path.write_text(f"""
tools:
  expert:
    type: recorded_expert
    settings: {{table: {table}, prompt_column: prompt, models: [expert-1, expert-2]}}
models:
  gpt-5: {{price: {{per_mtok_input: 1.25, per_mtok_output: 10.0}}}}
  qwen3-32b: {{price: {{per_mtok_input: 0.8, per_mtok_output: 0.8}}}}
aliases: {{expert-1: gpt-5, expert-2: qwen3-32b}}
""")
  return str(path)
