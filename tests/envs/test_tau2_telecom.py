"""τ²'s telecom domain: the carrier's tools, the user's phone, the sync of the two, gold scores.

Expected values are worked out by hand from the shipped db.toml/user_db.toml and τ²'s rules
(speed = middle of the technology's range x signal factor x data-saver factor, today 2025-02-25).
"""

import json

import pytest

from toolorch_jax.envs import load_env
from toolorch_jax.envs.tau2 import scoring
from toolorch_jax.envs.tau2.data import parse_task
from toolorch_jax.envs.tau2.toolkit import Sides

PHONE = "555-123-2002"  # John Smith's line L1002: Premium Plan (15 GB, $2/GB refuel), roaming on


@pytest.fixture(scope="module")
def env():
  return load_env("tau2_telecom", ["settings.mode=solo"])


@pytest.fixture
def sides(env):
  """John Smith at home with the default phone, synced with the carrier as a task sets it up."""
  task = parse_task({"id": "t", "initial_state": {"initialization_actions": [
      {"env_type": "user", "func_name": "set_user_info",
       "arguments": {"name": "John Smith", "phone_number": PHONE}}]}}, "test")
  return Sides(env.domain, *env.initial_dbs(task))


def agent(sides, name, **arguments):
  outcome = sides.call("assistant", name, arguments)
  return outcome.text if outcome.text[:1] not in "[{" else json.loads(outcome.text)


def user(sides, name, **arguments):
  outcome = sides.call("user", name, arguments)
  assert not outcome.error, outcome.text
  return outcome.text


def test_carrier_records_as_tau2_prints_them(sides):
  customer = agent(sides, "get_customer_by_phone", phone_number=PHONE)
  assert customer["customer_id"] == "C1001"
  assert customer["created_at"] == "2025-01-15 10:30:00"  # a datetime, printed by str()
  assert customer["last_extension_date"] is None  # a model default, absent from db.toml
  assert agent(sides, "get_customer_by_phone", phone_number="000") == \
      "Error: Customer with phone number 000 not found"
  assert agent(sides, "get_details_by_id", id="X1") == "Error: Unknown ID format or type: X1"
  assert agent(sides, "get_details_by_id", id="L1003")["status"] == "Suspended"
  # a plain dict: τ² writes its numbers as text
  assert agent(sides, "get_data_usage", customer_id="C1001", line_id="L1001") == {
      "line_id": "L1001", "data_used_gb": "3.2", "data_limit_gb": "5.0",
      "data_refueling_gb": "0.0", "cycle_end_date": "2025-02-28"}
  bills = agent(sides, "get_bills_for_customer", customer_id="C1001", limit=2)
  assert [b["bill_id"] for b in bills] == ["B1003", "B1002"]  # newest issue date first


def test_carrier_changes_and_refusals(sides):
  assert agent(sides, "refuel_data", customer_id="C1001", line_id="L1002", gb_amount=2) == {
      "message": "Successfully added 2 GB of data for line L1002 for $4.00",
      "new_data_refueling_gb": "2.0", "charge": "4.0"}
  draft = agent(sides, "get_details_by_id", id="B1003")  # the charge lands on the draft bill
  assert draft["total_due"] == 4.0 and draft["line_items"][-1] == {
      "description": "Data refueling: 2 GB at $2.0/GB", "amount": 4.0, "date": "2025-02-25",
      "item_type": "Charge"}
  assert agent(sides, "refuel_data", customer_id="C1001", line_id="L1002", gb_amount=0) == \
      "Error: Refuel amount must be positive"
  assert agent(sides, "suspend_line", customer_id="C1001", line_id="L1004", reason="x") == \
      "Error: Line L1004 not found for customer C1001"
  assert agent(sides, "resume_line", customer_id="C1001", line_id="L1001") == \
      "Error: Line must be suspended to resume"
  assert agent(sides, "enable_roaming", customer_id="C1001", line_id="L1002") == \
      "Roaming was already enabled"
  assert agent(sides, "send_payment_request", customer_id="C1001", bill_id="B1004") == \
      "Error: Bill B1004 not found for customer C1001"


def test_phone_tools_and_status_bar(sides):
  # user_db.toml's phone: 5G at "good" signal until the phone next searches the network
  assert user(sides, "check_status_bar") == \
      "Status Bar: \U0001f4f6\u00b3 Good | 5G | \U0001f4f1 Data Enabled | \U0001f50b 80%"
  assert user(sides, "run_speed_test") == \
      "Speed Test Result: 220.00 Mbps (Excellent). Connection is very fast."  # (50+500)/2 x 0.8
  user(sides, "toggle_data_saver_mode")
  assert user(sides, "run_speed_test").startswith("Speed Test Result: 44.00 Mbps (Good).")
  assert user(sides, "set_network_mode_preference", mode="2g_only").endswith(
      "\U0001f4f6\u00b9 Poor | 2G | \U0001f4f1 Data Enabled | \U0001f53d Data Saver"
      " | \U0001f50b 80%")
  assert user(sides, "can_send_mms") == "Your messaging app cannot send MMS messages."  # 2G
  assert user(sides, "set_network_mode_preference", mode="6g").startswith(
      "Failed to set network mode: '6g' is not a valid option. Please use one of:"
      " 4g_5g_preferred, 4g_only, 3g_only, 2g_only")
  assert user(sides, "toggle_airplane_mode") == \
      "Airplane Mode is now ON.\nStatus Bar: \u2708\ufe0f Airplane Mode | \U0001f50b 80%"
  assert user(sides, "toggle_wifi").startswith(
      "Cannot change Wi-Fi settings while Airplane Mode is ON.")
  assert user(sides, "run_speed_test") == "Speed test failed: No Connection."
  assert user(sides, "grant_app_permission", app_name="messaging", permission="camera") \
      .startswith("Error. Permission 'camera' not tracked for app 'messaging', available"
                  " permissions: ['sms', 'storage', 'phone', 'network']")
  assert sides.call("user", "toggle_data", {"on": True}).error  # τ² takes no such argument


def test_the_sides_sync(sides):
  assert agent(sides, "suspend_line", customer_id="C1001", line_id="L1002",
               reason="travel")["message"].startswith("Line suspended successfully")
  assert sides.dbs["user"].data["surroundings"]["line_active"] is False
  assert "\U0001f4f5 No Signal" in user(sides, "reboot_device")  # the network search fails
  assert agent(sides, "send_payment_request", customer_id="C1001", bill_id="B1002") == \
      "Payment request sent to the customer for bill B1002"
  assert user(sides, "check_payment_request") == \
      "You have a payment request for bill B1002 of 150.0 USD."
  assert user(sides, "make_payment") == "Payment of 150.0 USD has been made for bill B1002."
  assert agent(sides, "get_details_by_id", id="B1002")["status"] == "Paid"
  assert user(sides, "check_payment_request") == "No payment request has been made."


def test_gold_with_and_without_the_users_actions(env):
  specs = {t.id: t for t in _tasks()}
  agent_only = next(t for t in specs.values()
                    if all(a.requestor == "assistant" for a in t.criteria.actions))
  needs_user = next(t for t in specs.values()
                    if any(a.requestor == "user" for a in t.criteria.actions))
  for spec in (agent_only, needs_user):
    actions = spec.criteria.actions
    agent_initial, user_initial = env.initial_dbs(spec)
    reward, breakdown = scoring.score(
        env.domain, spec, agent_initial, [(a.name, a.arguments) for a in actions
                                          if a.requestor == "assistant"], [], True,
        user_initial=user_initial,
        user_calls=[(a.name, a.arguments) for a in actions if a.requestor == "user"],
        order=[a.requestor for a in actions])
    assert reward == 1.0, breakdown
  agent_initial, user_initial = env.initial_dbs(needs_user)
  reward, breakdown = scoring.score(
      env.domain, needs_user, agent_initial,
      [(a.name, a.arguments) for a in needs_user.criteria.actions if a.requestor == "assistant"],
      [], True, user_initial=user_initial)
  assert reward == 0.0 and not all(c["met"] for c in breakdown["env_assertions"])


def _tasks():
  from toolorch_jax.datadir import data_path
  raw = json.loads(data_path("tau2/domains/telecom/tasks.json").read_text())
  return [parse_task(t, f"tasks[{i}]") for i, t in enumerate(raw)]


def test_solo_episodes_get_the_users_tools(env):
  task = env.tasks()[0]
  episode = env.start(task)
  names = {schema["function"]["name"] for schema in episode.tool_schemas()}
  assert {"toggle_airplane_mode", "refuel_data", "done"} <= names
  assert "<main_policy>" in episode.messages()[0]["content"]
  assert "<tech_support_policy>" in episode.messages()[0]["content"]
