"""Task records and the readers and streams that feed them: below every environment."""

from toolorch_jax.data.jsonl import read_jsonl, read_texts
from toolorch_jax.data.split import in_split, stable_unit
from toolorch_jax.data.stream import TaskStream
from toolorch_jax.data.task import Preference, Task
from toolorch_jax.data.task_file import TaskFile, read_task_file

__all__ = ["Preference", "Task", "TaskFile", "TaskStream", "in_split", "read_jsonl", "read_task_file",
           "read_texts", "stable_unit"]
