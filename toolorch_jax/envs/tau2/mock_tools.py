"""The τ² `mock` domain: users with task lists; create tasks, update their status, or hand over.

Semantics as in τ²'s mock domain, read off its data (db.json: `tasks` by id with title, description,
status; `users` by id with their task ids), its policy (a title is required, status is `pending` or
`completed`, only existing users get tasks, deleting is not possible: transfer to a human) and the
gold actions of tasks.json (`create_task` makes `task_2` next to `task_1`). New task ids are
`task_<n>` with n = number of tasks + 1, as in τ²; should that id exist, the next free n is taken.
"""

from __future__ import annotations

from typing import Any, Mapping

from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.toolkit import Domain, DomainTool
from toolorch_jax.tools.base import ToolError

STATUSES = ("pending", "completed")


def _task(db: Database, task_id: str) -> dict[str, Any]:
  task = db.data["tasks"].get(task_id)
  if task is None:
    raise ToolError(f"task '{task_id}' not found")
  return task


class CreateTask(DomainTool):
  name = "create_task"
  description = "Create a new task for an existing user; it starts as pending. Returns the task."
  parameters = {
      "type": "object",
      "properties": {
          "user_id": {"type": "string", "description": "The id of the user the task is for."},
          "title": {"type": "string", "description": "The title of the task."},
          "description": {"type": ["string", "null"],
                          "description": "Optional description of the task."},
      },
      "required": ["user_id", "title"],
      "additionalProperties": False,
  }

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    user = self.db.data["users"].get(arguments["user_id"])
    if user is None:
      raise ToolError(f"user '{arguments['user_id']}' not found")
    tasks = self.db.data["tasks"]
    number = len(tasks) + 1
    while f"task_{number}" in tasks:
      number += 1
    task = {"task_id": f"task_{number}", "title": arguments["title"],
            "description": arguments.get("description"), "status": "pending"}
    tasks[task["task_id"]] = task
    user["tasks"].append(task["task_id"])
    return task


class GetUsers(DomainTool):
  name = "get_users"
  description = "List all users with their ids, names and task ids."
  parameters = {"type": "object", "properties": {}, "additionalProperties": False}

  def apply(self, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return list(self.db.data["users"].values())


class UpdateTaskStatus(DomainTool):
  name = "update_task_status"
  description = "Set the status of an existing task. Returns the updated task."
  parameters = {
      "type": "object",
      "properties": {
          "task_id": {"type": "string", "description": "The id of the task."},
          "status": {"type": "string", "enum": list(STATUSES), "description": "The new status."},
      },
      "required": ["task_id", "status"],
      "additionalProperties": False,
  }

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    task = _task(self.db, arguments["task_id"])
    task["status"] = arguments["status"]
    return task


class TransferToHumanAgents(DomainTool):
  name = "transfer_to_human_agents"
  description = ("Transfer the user to a human agent, with a summary of the issue. Only when the"
                 " user asks for one, or when the policy and the tools cannot resolve the issue.")
  parameters = {
      "type": "object",
      "properties": {"summary": {"type": "string",
                                 "description": "A summary of the user's issue."}},
      "required": ["summary"],
      "additionalProperties": False,
  }
  ends_episode = True

  def apply(self, arguments: dict[str, Any]) -> str:
    return "Transfer successful"


def assert_task_status(db: Database, arguments: Mapping[str, Any]) -> bool:
  return _task(db, arguments["task_id"])["status"] == arguments["expected_status"]


MOCK = Domain("mock", (CreateTask, GetUsers, UpdateTaskStatus, TransferToHumanAgents),
              {"assert_task_status": assert_task_status}, tables=("tasks", "users"))
