"""τ²'s airline and retail tools against hand-computed cases: outputs, refusals, errors, quirks.

Each domain's db is read once per module (airline's is 7 MB); each test works on its own copy.
Expected values were worked out by hand from the shipped db.json and τ²'s published tool rules.
"""

import json

import pytest

from toolorch_jax.datadir import data_file
from toolorch_jax.envs.tau2.airline import AIRLINE
from toolorch_jax.envs.tau2.data import read_db
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.retail import RETAIL
from toolorch_jax.envs.tau2.toolkit import attempt


@pytest.fixture(scope="module")
def airline_db():
  return Database(read_db(data_file("tau2/domains/airline/db.json", "test")))


@pytest.fixture(scope="module")
def retail_db():
  return Database(read_db(data_file("tau2/domains/retail/db.json", "test")))


@pytest.fixture
def airline(airline_db):
  db = airline_db.copy()
  return db, AIRLINE.bind(db)


@pytest.fixture
def retail(retail_db):
  db = retail_db.copy()
  return db, RETAIL.bind(db)


def ok(tools, name, **arguments):
  outcome = attempt(tools, name, arguments)
  assert not outcome.error, outcome.text
  return json.loads(outcome.text) if outcome.text[:1] in "[{" else outcome.text


def refused(tools, name, **arguments):
  outcome = attempt(tools, name, arguments)
  assert outcome.error
  return outcome.text


# ---------------------------------------------------------------- airline

def test_airline_lookups_and_their_errors(airline):
  _, tools = airline
  reservation = ok(tools, "get_reservation_details", reservation_id="NO6JO3")
  assert reservation["status"] is None  # a default of τ²'s model, absent from db.json
  assert reservation["payment_history"] == [{"payment_id": "credit_card_1955700", "amount": 2504}]
  assert ok(tools, "get_user_details", user_id="mia_li_3668")["membership"] == "gold"
  assert refused(tools, "get_user_details", user_id="nobody") == "Error: User nobody not found"
  assert refused(tools, "get_reservation_details", reservation_id="XXXXXX") == \
      "Error: Reservation XXXXXX not found"
  assert ok(tools, "get_flight_status", flight_number="HAT001", date="2024-05-03") == "cancelled"
  assert refused(tools, "get_flight_status", flight_number="HAT001", date="2024-06-30") == \
      "Error: Flight HAT001 not found on date 2024-06-30"
  assert refused(tools, "get_user_details", user_id="a", extra=1).startswith("Error: ")
  assert refused(tools, "no_such_tool") == "Error: Tool 'no_such_tool' not found."
  airports = ok(tools, "list_all_airports")
  assert len(airports) == 20 and airports[0] == {"iata": "SFO", "city": "San Francisco"}


def test_airline_calculate():
  tools = AIRLINE.bind(Database({"flights": {}, "users": {}, "reservations": {}}))
  assert ok(tools, "calculate", expression="2 + 2") == "4.0"
  assert ok(tools, "calculate", expression="(152 * 2 + 30) / 3") == "111.33"
  assert refused(tools, "calculate", expression="1 / 0") == "Error: division by zero"
  assert refused(tools, "calculate", expression="2 ** x") == \
      "Error: Invalid characters in expression"
  assert refused(tools, "calculate", expression="2 +") == \
      "Error: invalid syntax (<string>, line 1)"


def test_airline_search(airline):
  _, tools = airline
  direct = ok(tools, "search_direct_flight", origin="JFK", destination="ATL", date="2024-05-20")
  hat136 = next(f for f in direct if f["flight_number"] == "HAT136")
  assert hat136["date"] is None and hat136["status"] == "available"
  assert hat136["prices"] == {"basic_economy": 52, "economy": 152, "business": 277}
  pairs = ok(tools, "search_onestop_flight", origin="JFK", destination="DFW", date="2024-05-16")
  assert pairs and all(first["destination"] == second["origin"] and first["date"] == "2024-05-16"
                       for first, second in pairs)


def test_airline_booking_prices_pays_and_takes_seats(airline):
  db, tools = airline
  booking = dict(user_id="mia_li_3668", origin="JFK", destination="ATL", flight_type="one_way",
                 cabin="economy", flights=[{"flight_number": "HAT136", "date": "2024-05-20"}],
                 passengers=[{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"},
                             {"first_name": "Amelia", "last_name": "Ahmed", "dob": "1957-03-21"}],
                 total_baggages=2, nonfree_baggages=1, insurance="yes")
  # 2 x 152 + 2 x 30 insurance + 1 x 50 bag = 414
  assert refused(tools, "book_reservation", **booking,
                 payment_methods=[{"payment_id": "credit_card_4421486", "amount": 400}]) == \
      "Error: Payment amount does not add up, total price is 414, but paid 400"
  assert refused(tools, "book_reservation", **booking,
                 payment_methods=[{"payment_id": "certificate_4856383", "amount": 414}]) == \
      "Error: Not enough balance in payment method certificate_4856383"
  reservation = ok(tools, "book_reservation", **booking,
                   payment_methods=[{"payment_id": "certificate_4856383", "amount": 100},
                                    {"payment_id": "credit_card_4421486", "amount": 314}])
  assert reservation["reservation_id"] == "HATHAT" and reservation["created_at"] == \
      "2024-05-15T15:00:00"
  assert reservation["flights"] == [{"flight_number": "HAT136", "origin": "JFK",
                                     "destination": "ATL", "date": "2024-05-20", "price": 152}]
  user = db.data["users"]["mia_li_3668"]
  assert "certificate_4856383" not in user["payment_methods"]  # a certificate is used up
  assert user["reservations"][-1] == "HATHAT"
  assert db.data["flights"]["HAT136"]["dates"]["2024-05-20"]["available_seats"]["economy"] == 12
  assert ok(tools, "book_reservation", **booking, payment_methods=[
      {"payment_id": "credit_card_4421486", "amount": 414}])["reservation_id"] == "HATHAU"


def test_airline_changes_and_refusals(airline):
  db, tools = airline
  assert refused(tools, "update_reservation_baggages", reservation_id="NO6JO3", total_baggages=3,
                 nonfree_baggages=1, payment_id="certificate_7504069") == \
      "Error: Certificate cannot be used to update reservation"
  bags = ok(tools, "update_reservation_baggages", reservation_id="NO6JO3", total_baggages=3,
            nonfree_baggages=1, payment_id="credit_card_4421486")
  assert bags["payment_history"][-1] == {"payment_id": "credit_card_4421486", "amount": 50}
  assert refused(tools, "update_reservation_passengers", reservation_id="NO6JO3",
                 passengers=[]) == "Error: Number of passengers does not match"
  # same flights, cabin unchanged: kept at their old prices, nothing to pay, no payment record
  same = ok(tools, "update_reservation_flights", reservation_id="NO6JO3", cabin="business",
            flights=[{"flight_number": "HAT083", "date": "2024-05-16"},
                     {"flight_number": "HAT221", "date": "2024-05-16"}],
            payment_id="credit_card_4421486")
  assert len(same["payment_history"]) == 2
  cancelled = ok(tools, "cancel_reservation", reservation_id="NO6JO3")
  assert cancelled["status"] == "cancelled"
  assert cancelled["payment_history"][-2:] == [
      {"payment_id": "credit_card_1955700", "amount": -2504},
      {"payment_id": "credit_card_4421486", "amount": -50}]
  texts = [ok(tools, "send_certificate", user_id="mia_li_3668", amount=50) for _ in range(3)]
  assert texts[0] == "Certificate certificate_3221322 added to user mia_li_3668 with amount 50."
  assert db.data["users"]["mia_li_3668"]["payment_methods"]["certificate_3221324"]["amount"] == 50
  assert refused(tools, "send_certificate", user_id="mia_li_3668", amount=50) == \
      "Error: Too many certificates"
  assert ok(tools, "transfer_to_human_agents", summary="x") == "Transfer successful"


# ---------------------------------------------------------------- retail

def test_retail_lookups(retail):
  _, tools = retail
  assert ok(tools, "find_user_id_by_email", email="Ethan.Lopez8943@example.com") == \
      "ethan_lopez_6291"
  assert refused(tools, "find_user_id_by_email", email="x@y.z") == "Error: User not found"
  assert refused(tools, "get_order_details", order_id="W6779827") == "Error: Order not found"
  order = ok(tools, "get_order_details", order_id="#W6779827")
  assert order["cancel_reason"] is None and order["exchange_items"] is None  # model defaults
  types = attempt(tools, "list_all_product_types", {}).text
  assert list(json.loads(types)) == sorted(json.loads(types))  # τ² sorts the names
  assert refused(tools, "get_product_details", product_id="0") == "Error: Product not found"


def test_retail_cancel_refunds_a_gift_card_at_once(retail):
  db, tools = retail
  assert refused(tools, "cancel_pending_order", order_id="#W6779827", reason="too slow") == \
      "Error: Invalid reason"
  order = ok(tools, "cancel_pending_order", order_id="#W6779827", reason="no longer needed")
  assert order["status"] == "cancelled" and order["cancel_reason"] == "no longer needed"
  assert order["payment_history"][-1] == {"transaction_type": "refund", "amount": 4079.45,
                                          "payment_method_id": "gift_card_7219486"}
  # 49.0 + 4079.45
  assert db.data["users"]["ethan_lopez_6291"]["payment_methods"]["gift_card_7219486"][
      "balance"] == 4128.45
  assert refused(tools, "cancel_pending_order", order_id="#W6779827",
                 reason="no longer needed") == "Error: Non-pending order cannot be cancelled"


def test_retail_modify_items_prices_every_item_as_the_last_new_one(retail):
  db, tools = retail
  order = db.data["orders"]["#W6779827"]
  dumbbells = db.data["products"]["7233192239"]["variants"]
  other = next(item_id for item_id, v in dumbbells.items()
               if item_id != "7896397433" and v["available"])
  assert refused(tools, "modify_pending_order_items", order_id="#W6779827",
                 item_ids=["7896397433"], new_item_ids=["7896397433"],
                 payment_method_id="credit_card_9789590") == \
      "Error: The new item id should be different from the old item id"
  difference = round(dumbbells[other]["price"] - 457.81, 2)
  if difference > 49.0:
    assert refused(tools, "modify_pending_order_items", order_id="#W6779827",
                   item_ids=["7896397433"], new_item_ids=[other],
                   payment_method_id="gift_card_7219486").startswith("Error: Insufficient")
  modified = ok(tools, "modify_pending_order_items", order_id="#W6779827",
                item_ids=["7896397433"], new_item_ids=[other],
                payment_method_id="credit_card_9789590")
  assert modified["status"] == "pending (item modified)"
  assert modified["items"][0]["item_id"] == other
  assert modified["items"][0]["price"] == dumbbells[other]["price"]
  assert round(modified["payment_history"][-1]["amount"], 2) == abs(difference)
  assert order["status"] == "pending (item modified)"
  assert refused(tools, "modify_pending_order_items", order_id="#W6779827",
                 item_ids=[other], new_item_ids=["7896397433"],
                 payment_method_id="credit_card_9789590") == \
      "Error: Non-pending order cannot be modified"


def test_retail_return_and_exchange_refusals(retail):
  _, tools = retail
  assert refused(tools, "return_delivered_order_items", order_id="#W6779827",
                 item_ids=["7896397433"], payment_method_id="gift_card_7219486") == \
      "Error: Non-delivered order cannot be returned"
  returned = ok(tools, "return_delivered_order_items", order_id="#W4817420",
                item_ids=["6777246137", "4900661478"], payment_method_id="gift_card_8168843")
  assert returned["status"] == "return requested"
  assert returned["return_items"] == ["4900661478", "6777246137"]  # sorted, as in τ²
  assert refused(tools, "exchange_delivered_order_items", order_id="#W4817420",
                 item_ids=["6777246137"], new_item_ids=["6777246137"],
                 payment_method_id="gift_card_8168843") == \
      "Error: Non-delivered order cannot be exchanged"
