"""What an orchestra episode has gathered so far, as the experts are shown it.

ToolOrchestra's experts never see the orchestrator's conversation: each is prompted with the
question plus the documents found and the code run so far. Entries are kept in the order they
came; when the whole is longer than the budget, the oldest text is cut, as ToolOrchestra keeps
the tail of its context.
"""

from __future__ import annotations

import dataclasses


def code_block(code: str, output: str) -> str:
  """Code and what it printed, in the form the policy and the experts both see."""
  return f"```python\n{code}\n```\n\n```output\n{output.rstrip(chr(10))}\n```"


@dataclasses.dataclass
class Notes:
  max_chars: int
  entries: list[str] = dataclasses.field(default_factory=list)

  def add_search(self, query: str, results: str) -> None:
    self.entries.append(f"Search results for {query!r}:\n{results}")

  def add_code(self, code: str, output: str) -> None:
    self.entries.append("Python code and its output:\n" + code_block(code, output))

  def render(self) -> str:
    text = "\n\n".join(self.entries)
    return text if len(text) <= self.max_chars else "[...]" + text[len(text) - self.max_chars:]

  def prompt(self, question: str, instruction: str) -> str:
    """An expert's prompt: the context so far, the question, and what to write."""
    context = self.render()
    return (f"{context}\n\n" if context else "") + f"Question: {question}\n{instruction}"
