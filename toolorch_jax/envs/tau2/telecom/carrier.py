"""τ² telecom, the agent's side: customers, lines, plans, devices and bills of `db.toml`.

Outputs and errors as τ²'s telecom tools give them: records with every field of τ²'s data model
(`prepare` fills the defaults and writes datetimes as τ² prints them), plain results with their
numbers as text (τ² turns the scalars of a plain dict into strings), today frozen at 2025-02-25.
A new draft bill, which τ² names with a random uuid, is named here from the customer and the
bill count, so gold and replayed databases agree.
"""

from __future__ import annotations

import datetime
import hashlib
from typing import Any, ClassVar, Mapping

from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.shared import NUMBER, STRING, TransferToHumanAgents, described, obj
from toolorch_jax.envs.tau2.toolkit import DomainTool
from toolorch_jax.tools.base import ToolError

TODAY = datetime.date(2025, 2, 25)
DEFAULTS = {  # τ²'s data-model defaults of each table's records, in field order
    "plans": {},
    "devices": {"imei": None, "activated": False, "activation_date": None,
                "last_esim_transfer_date": None},
    "lines": {"status": "Pending Activation", "device_id": None, "data_used_gb": 0.0,
              "data_refueling_gb": 0.0, "roaming_enabled": False, "contract_end_date": None,
              "last_plan_change_date": None, "last_sim_replacement_date": None,
              "suspension_start_date": None},
    "customers": {"account_status": "Pending Verification", "payment_methods": [], "line_ids": [],
                  "bill_ids": [], "created_at": "2025-01-01", "last_extension_date": None,
                  "goodwill_credit_used_this_year": 0.0},
    "bills": {"line_items": [], "status": "Draft"},
}
FIELDS = {
    "plans": ("plan_id", "name", "data_limit_gb", "price_per_month",
              "data_refueling_price_per_gb"),
    "devices": ("device_id", "device_type", "model", "imei", "is_esim_capable", "activated",
                "activation_date", "last_esim_transfer_date"),
    "lines": ("line_id", "phone_number", "status", "plan_id", "device_id", "data_used_gb",
              "data_refueling_gb", "roaming_enabled", "contract_end_date", "last_plan_change_date",
              "last_sim_replacement_date", "suspension_start_date"),
    "customers": ("customer_id", "full_name", "date_of_birth", "email", "phone_number", "address",
                  "account_status", "payment_methods", "line_ids", "bill_ids", "created_at",
                  "last_extension_date", "goodwill_credit_used_this_year"),
    "bills": ("bill_id", "customer_id", "period_start", "period_end", "issue_date", "total_due",
              "due_date", "line_items", "status"),
}
DATETIMES = ("activation_date", "last_esim_transfer_date", "created_at")


def _when(value: Any) -> Any:
  """A date or datetime as τ² prints it (`str`): 2025-01-15 10:30:00, 2025-01-15."""
  if isinstance(value, str) and len(value) == 19 and value[10] == "T":
    return value.replace("T", " ")
  if isinstance(value, (datetime.date, datetime.datetime)):
    return str(value)
  return value


def prepare(data: dict[str, Any]) -> None:
  """Every record with all of τ²'s fields in its order, dates written as τ² prints them."""
  for table, defaults in DEFAULTS.items():
    records = data.setdefault(table, [])
    for i, record in enumerate(records):
      full = {key: _when(record.get(key, defaults.get(key))) for key in FIELDS[table]}
      if table == "bills":
        full["line_items"] = [{key: _when(value) for key, value in item.items()}
                              for item in full["line_items"]]
      records[i] = full


def text(value: Any) -> Any:
  """A scalar of a plain result as τ² writes it: its `str` (floats keep their `.0`)."""
  if isinstance(value, (bool, int, float)):
    return str(value)
  return _when(value)


class Carrier:
  """Lookups over the agent's db, failing with τ²'s messages."""

  def __init__(self, db: Database):
    self.data = db.data

  def _find(self, table: str, key: str, value: str, message: str) -> dict[str, Any]:
    for record in self.data[table]:
      if record[key] == value:
        return record
    raise ToolError(message)

  def customer(self, customer_id: str) -> dict[str, Any]:
    return self._find("customers", "customer_id", customer_id,
                      f"Customer with ID {customer_id} not found")

  def line(self, line_id: str) -> dict[str, Any]:
    return self._find("lines", "line_id", line_id, f"Line with ID {line_id} not found")

  def line_by_phone(self, phone_number: str) -> dict[str, Any]:
    return self._find("lines", "phone_number", phone_number,
                      f"Line with phone number {phone_number} not found")

  def plan(self, plan_id: str) -> dict[str, Any]:
    return self._find("plans", "plan_id", plan_id, f"Plan with ID {plan_id} not found")

  def device(self, device_id: str) -> dict[str, Any]:
    return self._find("devices", "device_id", device_id, f"Device with ID {device_id} not found")

  def bill(self, bill_id: str) -> dict[str, Any]:
    return self._find("bills", "bill_id", bill_id, f"Bill with ID {bill_id} not found")

  def customer_by_phone(self, phone_number: str) -> dict[str, Any]:
    for customer in self.data["customers"]:
      if customer["phone_number"] == phone_number:
        return customer
      for line_id in customer["line_ids"]:
        if self.line(line_id)["phone_number"] == phone_number:
          return customer
    raise ToolError(f"Customer with phone number {phone_number} not found")

  def target_line(self, customer_id: str, line_id: str) -> dict[str, Any]:
    customer = self.customer(customer_id)
    if line_id not in customer["line_ids"]:
      raise ToolError(f"Line {line_id} not found for customer {customer_id}")
    return self.line(line_id)

  def bills_awaiting_payment(self, customer: dict[str, Any]) -> list[dict[str, Any]]:
    return [bill for bill in (self.bill(bill_id) for bill_id in customer["bill_ids"])
            if bill["status"] == "Awaiting Payment"]

  def charge(self, customer_id: str, amount: float, description: str) -> None:
    """A one-time charge (or credit) on the customer's draft bill, made if there is none."""
    customer = self.customer(customer_id)
    draft = next((bill for bill in (self.bill(b) for b in customer["bill_ids"])
                  if bill["status"] == "Draft"), None)
    if draft is None:
      start = (TODAY.replace(day=1) + datetime.timedelta(days=32)).replace(day=1)
      after = (start.replace(month=start.month + 1) if start.month < 12
               else start.replace(month=1, year=start.year + 1))
      digest = hashlib.sha256(f"{customer_id}:{len(self.data['bills'])}".encode()).hexdigest()
      draft = {"bill_id": f"B{digest[:8]}", "customer_id": customer_id,
               "period_start": str(start), "period_end": str(after - datetime.timedelta(days=1)),
               "issue_date": str(start), "total_due": 0.0,
               "due_date": str(start + datetime.timedelta(days=14)), "line_items": [],
               "status": "Draft"}
      self.data["bills"].append(draft)
      customer["bill_ids"].append(draft["bill_id"])
    draft["line_items"].append({"description": description, "amount": amount,
                                "date": str(TODAY),
                                "item_type": "Credit" if amount < 0 else "Charge"})
    draft["total_due"] += amount


class CarrierTool(DomainTool):
  @property
  def carrier(self) -> Carrier:
    return Carrier(self.db)


CUSTOMER_ID = described(STRING, "ID of the customer who owns the line.")
LINE_ID = described(STRING, "ID of the line.")


class GetCustomerByPhone(CarrierTool):
  name = "get_customer_by_phone"
  description = "Finds a customer by their primary contact or line phone number."
  parameters: ClassVar[dict[str, Any]] = obj(
      {"phone_number": described(STRING, "The phone number to search for.")})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    return self.carrier.customer_by_phone(arguments["phone_number"])


class GetCustomerById(CarrierTool):
  name = "get_customer_by_id"
  description = "Retrieves a customer directly by their unique ID."
  parameters: ClassVar[dict[str, Any]] = obj(
      {"customer_id": described(STRING, "The unique identifier of the customer.")})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    return self.carrier.customer(arguments["customer_id"])


class GetCustomerByName(CarrierTool):
  name = "get_customer_by_name"
  description = ("Searches for customers by name and DOB. May return multiple matches if names"
                 " are similar, DOB helps disambiguate.")
  parameters: ClassVar[dict[str, Any]] = obj({
      "full_name": described(STRING, "The full name of the customer."),
      "dob": described(STRING, "Date of birth for verification, in the format YYYY-MM-DD.")})

  def apply(self, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in self.db.data["customers"]
            if c["full_name"].lower() == arguments["full_name"].lower()
            and c["date_of_birth"] == arguments["dob"]]


class GetDetailsById(CarrierTool):
  name = "get_details_by_id"
  description = ("Retrieves the details for a given ID. The ID must be a valid ID for a"
                 " Customer, Line, Device, Bill, or Plan.")
  parameters: ClassVar[dict[str, Any]] = obj(
      {"id": described(STRING, "The ID of the object to retrieve.")})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    key, carrier = arguments["id"], self.carrier
    lookups = {"L": carrier.line, "D": carrier.device, "B": carrier.bill, "C": carrier.customer,
               "P": carrier.plan}
    if key[:1] not in lookups:
      raise ToolError(f"Unknown ID format or type: {key}")
    return lookups[key[:1]](key)


class SuspendLine(CarrierTool):
  name = "suspend_line"
  description = ("Suspends a specific line (max 6 months). Checks: Line status must be Active."
                 " Logic: Sets line status to Suspended, records suspension_start_date.")
  parameters: ClassVar[dict[str, Any]] = obj({
      "customer_id": CUSTOMER_ID, "line_id": described(STRING, "ID of the line to suspend."),
      "reason": described(STRING, "Reason for suspension.")})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    line = self.carrier.target_line(arguments["customer_id"], arguments["line_id"])
    if line["status"] != "Active":
      raise ToolError("Line must be active to suspend")
    line["status"], line["suspension_start_date"] = "Suspended", str(TODAY)
    return {"message": "Line suspended successfully. $5/month holding fee will apply.",
            "line": line}


class ResumeLine(CarrierTool):
  name = "resume_line"
  description = ("Resumes a suspended line. Checks: Line status must be Suspended or Pending"
                 " Activation. Logic: Sets line status to Active, clears suspension_start_date.")
  parameters: ClassVar[dict[str, Any]] = obj(
      {"customer_id": CUSTOMER_ID, "line_id": described(STRING, "ID of the line to resume.")})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    line = self.carrier.target_line(arguments["customer_id"], arguments["line_id"])
    if line["status"] not in ("Suspended", "Pending Activation"):
      raise ToolError("Line must be suspended to resume")
    line["status"], line["suspension_start_date"] = "Active", None
    return {"message": "Line resumed successfully", "line": line}


class GetBillsForCustomer(CarrierTool):
  name = "get_bills_for_customer"
  description = "Retrieves a list of the customer's bills, most recent first."
  parameters: ClassVar[dict[str, Any]] = obj(
      {"customer_id": described(STRING, "ID of the customer.")},
      {"limit": described({"type": "integer", "default": 12},
                          "Maximum number of bills to return.")})

  def apply(self, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    carrier = self.carrier
    bills = [carrier.bill(b) for b in carrier.customer(arguments["customer_id"])["bill_ids"]]
    return sorted(bills, key=lambda bill: bill["issue_date"], reverse=True)[
        :arguments.get("limit", 12)]


class SendPaymentRequest(CarrierTool):
  name = "send_payment_request"
  description = ("Sends a payment request to the customer for a specific bill. Checks: the"
                 " customer exists, the bill exists and belongs to the customer, no other bill is"
                 " already awaiting payment. Logic: sets the bill status to AWAITING_PAYMENT."
                 " Warning: this does not check if the bill is already PAID; always check the bill"
                 " status before calling it.")
  parameters: ClassVar[dict[str, Any]] = obj({
      "customer_id": described(STRING, "ID of the customer who owns the bill."),
      "bill_id": described(STRING, "ID of the bill to send payment request for.")})

  def apply(self, arguments: dict[str, Any]) -> str:
    carrier, customer_id, bill_id = self.carrier, arguments["customer_id"], arguments["bill_id"]
    customer = carrier.customer(customer_id)
    if carrier.bills_awaiting_payment(customer):
      raise ToolError("A bill is already awaiting payment for this customer")
    if bill_id not in customer["bill_ids"]:
      raise ToolError(f"Bill {bill_id} not found for customer {customer_id}")
    bill = carrier.bill(bill_id)
    bill["status"] = "Awaiting Payment"
    return f"Payment request sent to the customer for bill {bill['bill_id']}"


class GetDataUsage(CarrierTool):
  name = "get_data_usage"
  description = ("Retrieves current billing cycle data usage for a line, including data"
                 " refueling amount, data limit, and cycle end date.")
  parameters: ClassVar[dict[str, Any]] = obj({
      "customer_id": CUSTOMER_ID, "line_id": described(STRING, "ID of the line to check usage"
                                                       " for.")})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    line = self.carrier.target_line(arguments["customer_id"], arguments["line_id"])
    plan = self.carrier.plan(line["plan_id"])
    month_end = (TODAY.replace(day=1) + datetime.timedelta(days=32)).replace(day=1) \
        - datetime.timedelta(days=1)
    return {"line_id": arguments["line_id"], "data_used_gb": text(line["data_used_gb"]),
            "data_limit_gb": text(plan["data_limit_gb"]),
            "data_refueling_gb": text(line["data_refueling_gb"]), "cycle_end_date": str(month_end)}


class EnableRoaming(CarrierTool):
  name = "enable_roaming"
  description = "Enables international roaming on a line."
  parameters: ClassVar[dict[str, Any]] = obj({
      "customer_id": CUSTOMER_ID,
      "line_id": described(STRING, "ID of the line to enable roaming for.")})

  def apply(self, arguments: dict[str, Any]) -> str:
    line = self.carrier.target_line(arguments["customer_id"], arguments["line_id"])
    if line["roaming_enabled"]:
      return "Roaming was already enabled"
    line["roaming_enabled"] = True
    return "Roaming enabled successfully"


class DisableRoaming(CarrierTool):
  name = "disable_roaming"
  description = "Disables international roaming on a line."
  parameters: ClassVar[dict[str, Any]] = obj({
      "customer_id": CUSTOMER_ID,
      "line_id": described(STRING, "ID of the line to disable roaming for.")})

  def apply(self, arguments: dict[str, Any]) -> str:
    line = self.carrier.target_line(arguments["customer_id"], arguments["line_id"])
    if not line["roaming_enabled"]:
      return "Roaming was already disabled"
    line["roaming_enabled"] = False
    return "Roaming disabled successfully"


class RefuelData(CarrierTool):
  name = "refuel_data"
  description = ("Refuels data for a specific line, adding to the customer's bill. Checks: Line"
                 " status must be Active, Customer owns the line. Logic: Adds data to the line and"
                 " charges customer based on the plan's refueling rate.")
  parameters: ClassVar[dict[str, Any]] = obj({
      "customer_id": CUSTOMER_ID,
      "line_id": described(STRING, "ID of the line to refuel data for."),
      "gb_amount": described(NUMBER, "Amount of data to add in gigabytes.")})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    carrier, gb = self.carrier, arguments["gb_amount"]
    line = carrier.target_line(arguments["customer_id"], arguments["line_id"])
    if gb <= 0:
      raise ToolError("Refuel amount must be positive")
    rate = carrier.plan(line["plan_id"])["data_refueling_price_per_gb"]
    charge = gb * rate
    line["data_refueling_gb"] += gb
    carrier.charge(arguments["customer_id"], charge, f"Data refueling: {gb} GB at ${rate}/GB")
    return {"message": f"Successfully added {gb} GB of data for line {arguments['line_id']} for"
                       f" ${charge:.2f}",
            "new_data_refueling_gb": text(line["data_refueling_gb"]), "charge": text(charge)}


AGENT_TOOLS = (GetCustomerByPhone, GetCustomerById, GetCustomerByName, GetDetailsById, SuspendLine,
               ResumeLine, GetBillsForCustomer, SendPaymentRequest, GetDataUsage, EnableRoaming,
               DisableRoaming, TransferToHumanAgents, RefuelData)


# ------------------------------------------------ env functions: task set-up and assertions

def set_data_usage(db: Database, arguments: Mapping[str, Any]) -> str:
  line = Carrier(db).target_line(arguments["customer_id"], arguments["line_id"])
  line["data_used_gb"] = arguments["data_used_gb"]
  return f"Data usage set to {arguments['data_used_gb']} GB for line {arguments['line_id']}"


def suspend_line_for_overdue_bill(db: Database, arguments: Mapping[str, Any]) -> str:
  """Adds last month's overdue bill for the line's plan and suspends the line."""
  carrier, customer_id = Carrier(db), arguments["customer_id"]
  line = carrier.line(arguments["line_id"])
  if line["status"] != "Active":
    raise ToolError("Line must be active to suspend for unpaid bill")
  amount = carrier.plan(line["plan_id"])["price_per_month"]
  if amount <= 0:
    raise ToolError("Amount must be positive for overdue bill")
  customer = carrier.customer(customer_id)
  if any(carrier.bill(b)["status"] == "Overdue" for b in customer["bill_ids"]):
    raise ToolError("Customer already has an overdue bill")
  last_day = TODAY.replace(day=1) - datetime.timedelta(days=1)
  first_day = last_day.replace(day=1)
  bill_id = arguments["new_bill_id"]
  db.data["bills"].append({
      "bill_id": bill_id, "customer_id": customer_id, "period_start": str(first_day),
      "period_end": str(last_day), "issue_date": str(first_day), "total_due": 0.0 + amount,
      "due_date": str(first_day + datetime.timedelta(days=14)),
      "line_items": [{"description": f"Charge for line {line['line_id']}", "amount": amount,
                      "date": str(TODAY), "item_type": "Charge"}],
      "status": "Overdue"})
  customer["bill_ids"].append(bill_id)
  line["status"], line["suspension_start_date"] = "Suspended", str(TODAY)
  if arguments["contract_ended"]:
    line["contract_end_date"] = str(last_day)
  return (f"Line {arguments['line_id']} suspended for unpaid bill {bill_id}. Contract ended:"
          f" {arguments['contract_ended']}")


def assert_data_refueling_amount(db: Database, arguments: Mapping[str, Any]) -> bool:
  line = Carrier(db).target_line(arguments["customer_id"], arguments["line_id"])
  return abs(line["data_refueling_gb"] - arguments["expected_amount"]) < 1e-06


def assert_line_status(db: Database, arguments: Mapping[str, Any]) -> bool:
  line = Carrier(db).target_line(arguments["customer_id"], arguments["line_id"])
  return line["status"] == arguments["expected_status"]


def assert_overdue_bill_exists(db: Database, arguments: Mapping[str, Any]) -> bool:
  carrier, bill_id = Carrier(db), arguments["overdue_bill_id"]
  if bill_id not in carrier.customer(arguments["customer_id"])["bill_ids"]:
    raise ToolError(f"Overdue bill {bill_id} not found")
  if carrier.bill(bill_id)["status"] != "Overdue":
    raise ToolError(f"Overdue bill {bill_id} is not overdue")
  return True


def assert_no_overdue_bill(db: Database, arguments: Mapping[str, Any]) -> bool:
  """Met when the bill is gone or paid."""
  try:
    return Carrier(db).bill(arguments["overdue_bill_id"])["status"] == "Paid"
  except ToolError:
    return True


FUNCTIONS = {"set_data_usage": set_data_usage,
             "suspend_line_for_overdue_bill": suspend_line_for_overdue_bill}
ASSERTIONS = {"assert_data_refueling_amount": assert_data_refueling_amount,
              "assert_line_status": assert_line_status,
              "assert_overdue_bill_exists": assert_overdue_bill_exists,
              "assert_no_overdue_bill": assert_no_overdue_bill}
