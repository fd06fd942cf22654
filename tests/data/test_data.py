"""TaskStream (determinism, per-epoch reshuffle, exact resume), jsonl task files and corpora."""

import json

import pytest

from toolorch_jax.config import ConfigError
from toolorch_jax.data import TaskFile, TaskStream, read_task_file, read_texts
from toolorch_jax.data import Task

TASKS = [Task(f"t{i}", f"question {i}", i) for i in range(10)]


def ids(batches):
  return [[task.task_id for task in batch] for batch in batches]


def take(stream, n):
  return ids(next(stream) for _ in range(n))


def test_same_seed_same_batches_and_seeds_differ():
  assert take(TaskStream(TASKS, 3, seed=1), 9) == take(TaskStream(TASKS, 3, seed=1), 9)
  assert take(TaskStream(TASKS, 3, seed=1), 9) != take(TaskStream(TASKS, 3, seed=2), 9)


def test_each_epoch_is_a_new_permutation_of_distinct_tasks():
  stream = TaskStream(TASKS, 3, seed=0)
  assert stream.batches_per_epoch == 3  # 10 tasks: one dropped per epoch
  epochs = [take(stream, 3) for _ in range(4)]
  for epoch in epochs:
    flat = [task for batch in epoch for task in batch]
    assert len(set(flat)) == 9 and all(len(batch) == 3 for batch in epoch)
  assert len({tuple(map(tuple, epoch)) for epoch in epochs}) == 4
  assert take(TaskStream(TASKS, 5, seed=0, shuffle=False), 3) == [
      [f"t{i}" for i in range(5)], [f"t{i}" for i in range(5, 10)], [f"t{i}" for i in range(5)]]


@pytest.mark.parametrize("consumed", [0, 2, 3, 7])
def test_state_round_trip_continues_exactly(consumed):
  stream = TaskStream(TASKS, 3, seed=4)
  take(stream, consumed)
  state = json.loads(json.dumps(stream.get_state()))  # as the checkpoint stores it
  expected = take(stream, 8)
  resumed = TaskStream(TASKS, 3, seed=4)
  resumed.set_state(state)
  assert take(resumed, 8) == expected
  assert next(iter(resumed)) is not None  # still endless


def test_process_shards_cut_the_same_global_batches():
  """Each process's stream is its contiguous share of the one-process batch, at `offset`."""
  whole = take(TaskStream(TASKS, 5, seed=3), 6)
  shards = [TaskStream(TASKS, 5, seed=3, shard=(i, 2)) for i in range(2)]
  assert [s.offset for s in shards] == [0, 3]
  parts = [take(s, 6) for s in shards]
  assert [a + b for a, b in zip(*parts)] == whole
  with pytest.raises(ConfigError, match="'shard' was \\[0, 2\\] when saved, is \\[1, 2\\]"):
    shards[1].set_state(shards[0].get_state())


def test_state_of_another_stream_is_refused():
  state = TaskStream(TASKS, 3, seed=4).get_state()
  with pytest.raises(ConfigError, match="'batch_size' was 3 when saved, is 2 now"):
    TaskStream(TASKS, 2, seed=4).set_state(state)
  with pytest.raises(ConfigError, match="'task_ids_sha256'"):
    TaskStream(TASKS[::-1], 3, seed=4).set_state(state)
  with pytest.raises(ConfigError, match="batch_size 11 must be between 1 and the number of tasks"):
    TaskStream(TASKS, 11, seed=0)


def write(tmp_path, *lines):
  path = tmp_path / "tasks.jsonl"
  path.write_text("\n".join(lines) + "\n")
  return str(path)


def test_read_task_file(tmp_path):
  path = write(tmp_path, json.dumps({"q": "What is 2+2?", "a": 4, "id": 17, "level": "easy"}), "",
               json.dumps({"q": "Capital of Italy?", "a": "Rome", "id": "x"}))
  tasks = read_task_file(TaskFile(path, id_field="id", question_field="q", answer_field="a"), "key")
  assert [(t.task_id, t.prompt, t.answer, t.metadata) for t in tasks] == [
      ("17", "What is 2+2?", "4", {"level": "easy"}), ("x", "Capital of Italy?", "Rome", {})]
  by_index = read_task_file(TaskFile(path, id_field="", question_field="q", answer_field="a"), "key")
  assert [t.task_id for t in by_index] == ["tasks-0", "tasks-1"]


def test_answer_marker_keeps_the_solution(tmp_path):
  path = write(tmp_path, json.dumps({"question": "3 * 6?", "answer": "3 * 6 = 18\n#### 18"}))
  (task,) = read_task_file(TaskFile(path, name="g", id_field="", answer_marker="####"), "key")
  assert (task.task_id, task.answer, task.metadata) == ("g-0", "18", {"solution": "3 * 6 = 18\n#### 18"})


@pytest.mark.parametrize("second_line,message", [
    ('{"q": "b", "a": 1', r"tasks.jsonl:2: not valid JSON"),
    ('["q", "a"]', r"tasks.jsonl:2: expected a JSON object, got list"),
    ('{"q": "b", "id": "y"}', r"tasks.jsonl:2: field 'a' must be a non-empty string \(missing\)"),
    ('{"q": ["b"], "a": 1, "id": "y"}',
     r"tasks.jsonl:2: field 'q' must be a non-empty string \(got \['b'\]\)"),
    ('{"a": 1, "id": "y"}', r"tasks.jsonl:2: field 'q' must be a non-empty string \(missing\)"),
    ('{"q": "b", "a": 1}', r"tasks.jsonl:2: field 'id' must be a non-empty string \(missing\)"),
    ('{"q": "b", "a": 1, "id": "x"}', r"tasks.jsonl:2: duplicate id 'x' \(first at .*tasks.jsonl:1\)"),
])
def test_bad_lines_name_the_line_and_field(tmp_path, second_line, message):
  path = write(tmp_path, '{"q": "a", "a": 0, "id": "x"}', second_line)
  with pytest.raises(ConfigError, match=message):
    read_task_file(TaskFile(path, question_field="q", answer_field="a"), "key")


def test_missing_and_empty_files(tmp_path):
  with pytest.raises(ConfigError, match="settings.tasks: file not found: .*nope.jsonl"):
    read_task_file(TaskFile(str(tmp_path / "nope.jsonl")), "settings.tasks")
  with pytest.raises(ConfigError, match="settings.tasks: .* holds no tasks"):
    read_task_file(TaskFile(write(tmp_path, "")), "settings.tasks")


def test_read_texts(tmp_path):
  lines = tmp_path / "corpus.txt"
  lines.write_text("one\n\ntwo\n")
  assert list(read_texts(lines, "text")) == ["one", "two"]
  records = tmp_path / "corpus.jsonl"
  records.write_text('{"text": "a"}\n{"body": "b"}\n')
  with pytest.raises(ConfigError, match="corpus.jsonl:2: no string field 'text'"):
    list(read_texts(records, "text"))
