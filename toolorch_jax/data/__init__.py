"""Task data for training: jsonl task files and checkpointable grain streams of task batches."""

from toolorch_jax.data.stream import TaskStream
from toolorch_jax.data.tasks import read_jsonl, read_task_file

__all__ = ["TaskStream", "read_jsonl", "read_task_file"]
