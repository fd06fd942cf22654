"""ToolOrchestra's orchestrator on τ²: the domain tools plus `call_expert`.

The policy acts as τ²'s agent and may ask an expert model (`expert-1`, `expert-2`, ... by alias,
their prices in the tool description) a question about the conversation. The expert is a tool of
a tool set (`llm_expert` for endpoints, `recorded_expert` offline): it gets the domain policy and
the conversation as the agent saw it, then the policy's question, and its answer is the
observation. Its cost and latency are the call's, so the efficiency rewards see them.
"""

from __future__ import annotations

from typing import Any, Protocol

from toolorch_jax.config import ConfigError
from toolorch_jax.tools.base import Tool, ToolContext, ToolResult

CALL_EXPERT = "call_expert"
INSTRUCTIONS = (
    f"You may call `{CALL_EXPERT}` to ask an expert model a question about the conversation (for"
    " instance what the policy requires next); the experts differ in skill and price, listed in"
    " the tool's description. Their answer is advice: you still act and speak yourself.")

GOLD_QUESTION = "What does the policy require me to do for this user's request?"


class Conversation(Protocol):
  log: list[dict[str, str]]  # {"role", "content"}: what the agent saw and did, in order


def _transcript(log: list[dict[str, str]]) -> str:
  names = {"assistant": "Agent", "user": "User", "tool": "Tool"}
  return "\n".join(f"{names.get(m['role'], m['role'])}: {m['content']}" for m in log)


class CallExpert(Tool):
  """`call_expert(expert, question)` for one episode."""

  def __init__(self, expert: Tool, models: list[str], policy: str, conversation: Conversation):
    super().__init__(CALL_EXPERT, description=(
        "Ask an expert model a question about this conversation; it sees the policy and the"
        f" conversation so far.\n{expert.description}"))
    self.expert, self.policy, self.conversation = expert, policy, conversation
    self.parameters = {"type": "object", "properties": {
        "expert": {"type": "string", "enum": models, "description": "the alias of the expert"},
        "question": {"type": "string", "description": "what you want the expert to answer"}},
        "required": ["expert", "question"], "additionalProperties": False}

  def backend_for(self, arguments: dict[str, Any]) -> str:
    return self.expert.backend_for({"model": arguments["expert"]})

  async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    context_text = (
        "You advise a customer service agent who follows the policy below.\n\n<policy>\n"
        f"{self.policy.strip()}\n</policy>\n\nThe conversation so far:\n"
        f"{_transcript(self.conversation.log)}")
    result = await self.expert.call({"model": arguments["expert"], "messages": [
        {"role": "system", "content": context_text},
        {"role": "user", "content": arguments["question"]}]}, context)
    result.metadata.setdefault("counts_as", arguments["expert"])
    if result.error:
      result.error = f"expert '{arguments['expert']}' failed: {result.error}"
    return result


class ExpertDesk:
  """The expert tool of a tool set and its models, giving each episode its `call_expert`."""

  def __init__(self, expert: Tool, policy: str, key: str):
    properties = expert.parameters.get("properties", {})
    models = properties.get("model", {}).get("enum")
    if not models or "messages" not in properties:
      raise ConfigError(f"{key}: tool '{expert.name}' is not an expert: it needs a 'model'"
                        " argument with a list of choices and 'messages' (types llm_expert,"
                        " recorded_expert)")
    self.expert, self.models, self.policy = expert, list(models), policy

  def bind(self, conversation: Conversation) -> CallExpert:
    return CallExpert(self.expert, self.models, self.policy, conversation)
