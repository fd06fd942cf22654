"""τ²'s `airline` domain: flights by date, users with payment methods, reservations.

Our own code over the data directory's `tau2/domains/airline/db.json`, giving the outputs and
errors τ²'s airline tools give for the same calls: the same records (every field of τ²'s data
model, defaults included), the same messages, the same quirks (cancelling frees no seats, a
changed itinerary books no seats, the day after is written unpadded in one-stop searches). The
clock is frozen at 2024-05-15T15:00:00; new reservation ids are HATHAT, HATHAU, HATHAV and new
certificates certificate_3221322..4, as in τ².
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from toolorch_jax.envs.tau2.shared import (INTEGER, STRING, Calculate, TransferToHumanAgents,
                                           described, enum, obj, whole)
from toolorch_jax.envs.tau2.toolkit import Domain, DomainTool
from toolorch_jax.tools.base import ToolError

NOW = "2024-05-15T15:00:00"
NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
NEW_PAYMENT_NUMBERS = (3221322, 3221323, 3221324)
CABINS = ("business", "economy", "basic_economy")
INSURANCE_FEE, BAG_FEE = 30, 50
AIRPORTS = (("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"),
            ("ORD", "Chicago"), ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"),
            ("ATL", "Atlanta"), ("MIA", "Miami"), ("BOS", "Boston"), ("PHX", "Phoenix"),
            ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"), ("EWR", "Newark"),
            ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"),
            ("PHL", "Philadelphia"), ("LGA", "LaGuardia"))
RESERVATION_FIELDS = ("reservation_id", "user_id", "origin", "destination", "flight_type", "cabin",
                      "flights", "passengers", "payment_history", "created_at", "total_baggages",
                      "nonfree_baggages", "insurance", "status")

FLIGHT_INFO = {"type": "object", "properties": {
    "flight_number": described(STRING, "Flight number, such as 'HAT001'."),
    "date": described(STRING, "The date for the flight in the format 'YYYY-MM-DD', such as"
                      " '2024-05-01'.")}, "required": ["flight_number", "date"]}
PASSENGER = {"type": "object", "properties": {
    "first_name": STRING, "last_name": STRING,
    "dob": described(STRING, "Date of birth in the format 'YYYY-MM-DD'.")},
    "required": ["first_name", "last_name", "dob"]}
PAYMENT = {"type": "object", "properties": {
    "payment_id": described(STRING, "The payment id stored in the user profile."),
    "amount": described(INTEGER, "The amount paid with this method.")},
    "required": ["payment_id", "amount"]}
RESERVATION_ID = described(STRING, "The reservation ID, such as 'ZFA04Y'.")
USER_ID = described(STRING, "The user ID, such as 'sara_doe_496'.")
PAYMENT_ID = described(STRING, "The payment id stored in user profile, such as"
                       " 'credit_card_7815826', 'gift_card_7815826', 'certificate_7815826'.")
DATE = described(STRING, "The date of the flight in the format 'YYYY-MM-DD', such as"
                 " '2024-01-01'.")
AIRPORT = described(STRING, "The city airport in three letters, such as 'JFK'.")


class AirlineTool(DomainTool):
  """Lookups shared by the airline tools, failing with τ²'s messages."""

  def user(self, user_id: str) -> dict[str, Any]:
    if user_id not in self.db.data["users"]:
      raise ToolError(f"User {user_id} not found")
    return self.db.data["users"][user_id]

  def reservation(self, reservation_id: str) -> dict[str, Any]:
    if reservation_id not in self.db.data["reservations"]:
      raise ToolError(f"Reservation {reservation_id} not found")
    return self.db.data["reservations"][reservation_id]

  def flight(self, flight_number: str) -> dict[str, Any]:
    if flight_number not in self.db.data["flights"]:
      raise ToolError(f"Flight {flight_number} not found")
    return self.db.data["flights"][flight_number]

  def flight_date(self, flight_number: str, date: str) -> dict[str, Any]:
    flight = self.flight(flight_number)
    if date not in flight["dates"]:
      raise ToolError(f"Flight {flight_number} not found on date {date}")
    return flight["dates"][date]

  def bookable(self, flight_number: str, date: str, cabin: str, seats: int) -> dict[str, Any]:
    """The date's record of a flight with `seats` free in `cabin`, else τ²'s refusal."""
    day = self.flight_date(flight_number, date)
    if day["status"] != "available":
      raise ToolError(f"Flight {flight_number} not available on date {date}")
    if day["available_seats"][cabin] < seats:
      raise ToolError(f"Not enough seats on flight {flight_number}")
    return day

  def direct_flights(self, date: str, origin: str | None, destination: str | None,
                     leave_after: str | None = None) -> list[dict[str, Any]]:
    found = []
    for flight in self.db.data["flights"].values():
      day = flight["dates"].get(date)
      if ((origin is None or flight["origin"] == origin)
          and (destination is None or flight["destination"] == destination)
          and day is not None and day["status"] == "available"
          and (leave_after is None or flight["scheduled_departure_time_est"] >= leave_after)):
        found.append({"flight_number": flight["flight_number"], "origin": flight["origin"],
                      "destination": flight["destination"], "status": "available",
                      "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
                      "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"],
                      "date": None, "available_seats": dict(day["available_seats"]),
                      "prices": dict(day["prices"])})
    return found

  def charge_update(self, user: dict[str, Any], payment_id: str,
                    total: int) -> dict[str, Any] | None:
    """Pays a change to a reservation: no certificates; a gift card must cover it."""
    if payment_id not in user["payment_methods"]:
      raise ToolError("Payment method not found")
    method = user["payment_methods"][payment_id]
    if method["source"] == "certificate":
      raise ToolError("Certificate cannot be used to update reservation")
    if method["source"] == "gift_card" and method["amount"] < total:
      raise ToolError("Gift card balance is not enough")
    if method["source"] == "gift_card":
      method["amount"] -= total
    return {"payment_id": payment_id, "amount": total} if total != 0 else None


def reservation_view(reservation: dict[str, Any]) -> dict[str, Any]:
  """A reservation with every field of τ²'s model (`status` is null until cancelled)."""
  return {key: reservation.get(key) for key in RESERVATION_FIELDS}


def _passengers(passengers: list[dict[str, Any]]) -> list[dict[str, Any]]:
  return [{key: p[key] for key in ("first_name", "last_name", "dob")} for p in passengers]


def _flight_infos(flights: list[dict[str, Any]]) -> list[dict[str, Any]]:
  return [{"flight_number": f["flight_number"], "date": f["date"]} for f in flights]


class BookReservation(AirlineTool):
  name = "book_reservation"
  description = "Book a reservation."
  parameters: ClassVar[dict[str, Any]] = obj({
      "user_id": USER_ID,
      "origin": described(STRING, "The IATA code for the origin city such as 'SFO'."),
      "destination": described(STRING, "The IATA code for the destination city such as 'JFK'."),
      "flight_type": enum("round_trip", "one_way"),
      "cabin": enum(*CABINS),
      "flights": {"type": "array", "items": FLIGHT_INFO,
                  "description": "An array of objects containing details about each piece of"
                  " flight."},
      "passengers": {"type": "array", "items": PASSENGER,
                     "description": "An array of objects containing details about each"
                     " passenger."},
      "payment_methods": {"type": "array", "items": PAYMENT,
                          "description": "An array of objects containing details about each"
                          " payment method."},
      "total_baggages": described(INTEGER, "The total number of baggage items to book the"
                                  " reservation."),
      "nonfree_baggages": described(INTEGER, "The number of non-free baggage items to book the"
                                    " reservation."),
      "insurance": enum("yes", "no")})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    flights = _flight_infos(arguments["flights"])
    passengers = _passengers(arguments["passengers"])
    payments = [{"payment_id": p["payment_id"], "amount": whole(p["amount"], "amount")}
                for p in arguments["payment_methods"]]
    user = self.user(arguments["user_id"])
    reservation_id = next((rid for rid in NEW_RESERVATION_IDS
                           if rid not in self.db.data["reservations"]), None)
    if reservation_id is None:
      raise ToolError("Too many reservations")
    cabin, seats = arguments["cabin"], len(passengers)
    booked, days, total = [], [], 0
    for info in flights:
      flight = self.flight(info["flight_number"])
      day = self.bookable(info["flight_number"], info["date"], cabin, seats)
      price = day["prices"][cabin]
      booked.append({"flight_number": info["flight_number"], "origin": flight["origin"],
                     "destination": flight["destination"], "date": info["date"], "price": price})
      days.append(day)
      total += price * seats
    if arguments["insurance"] == "yes":
      total += INSURANCE_FEE * seats
    total += BAG_FEE * arguments["nonfree_baggages"]
    for payment in payments:
      if payment["payment_id"] not in user["payment_methods"]:
        raise ToolError(f"Payment method {payment['payment_id']} not found")
      method = user["payment_methods"][payment["payment_id"]]
      if method["source"] in ("gift_card", "certificate") and method["amount"] < payment["amount"]:
        raise ToolError(f"Not enough balance in payment method {payment['payment_id']}")
    paid = sum(payment["amount"] for payment in payments)
    if paid != total:
      raise ToolError(f"Payment amount does not add up, total price is {total}, but paid {paid}")
    for payment in payments:
      method = user["payment_methods"][payment["payment_id"]]
      if method["source"] == "gift_card":
        method["amount"] -= payment["amount"]
      elif method["source"] == "certificate":
        user["payment_methods"].pop(payment["payment_id"])
    for day in days:
      day["available_seats"][cabin] -= seats
    reservation = {
        "reservation_id": reservation_id, "user_id": arguments["user_id"],
        "origin": arguments["origin"], "destination": arguments["destination"],
        "flight_type": arguments["flight_type"], "cabin": cabin, "flights": booked,
        "passengers": passengers, "payment_history": payments, "created_at": NOW,
        "total_baggages": arguments["total_baggages"],
        "nonfree_baggages": arguments["nonfree_baggages"], "insurance": arguments["insurance"],
        "status": None}
    self.db.data["reservations"][reservation_id] = reservation
    user["reservations"].append(reservation_id)
    return copy.deepcopy(reservation)


class CancelReservation(AirlineTool):
  name = "cancel_reservation"
  description = "Cancel the whole reservation."
  parameters: ClassVar[dict[str, Any]] = obj({"reservation_id": RESERVATION_ID})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    reservation = self.reservation(arguments["reservation_id"])
    refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]}
               for p in reservation["payment_history"]]
    reservation["payment_history"].extend(refunds)
    reservation["status"] = "cancelled"
    return reservation_view(reservation)


class GetReservationDetails(AirlineTool):
  name = "get_reservation_details"
  description = "Get the details of a reservation."
  parameters: ClassVar[dict[str, Any]] = obj({"reservation_id": RESERVATION_ID})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    return reservation_view(self.reservation(arguments["reservation_id"]))


class GetUserDetails(AirlineTool):
  name = "get_user_details"
  description = "Get the details of a user, including their reservations."
  parameters: ClassVar[dict[str, Any]] = obj({"user_id": USER_ID})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    return self.user(arguments["user_id"])


class ListAllAirports(AirlineTool):
  name = "list_all_airports"
  description = "Returns a list of all available airports."
  parameters: ClassVar[dict[str, Any]] = obj({})

  def apply(self, arguments: dict[str, Any]) -> list[dict[str, str]]:
    return [{"iata": iata, "city": city} for iata, city in AIRPORTS]


class SearchDirectFlight(AirlineTool):
  name = "search_direct_flight"
  description = "Search for direct flights between two cities on a specific date."
  parameters: ClassVar[dict[str, Any]] = obj(
      {"origin": AIRPORT, "destination": AIRPORT, "date": DATE})

  def apply(self, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return self.direct_flights(arguments["date"], arguments["origin"], arguments["destination"])


class SearchOnestopFlight(AirlineTool):
  name = "search_onestop_flight"
  description = "Search for one-stop flights between two cities on a specific date."
  parameters: ClassVar[dict[str, Any]] = obj(
      {"origin": AIRPORT, "destination": AIRPORT, "date": DATE})

  def apply(self, arguments: dict[str, Any]) -> list[list[dict[str, Any]]]:
    date, pairs = arguments["date"], []
    for first in self.direct_flights(date, arguments["origin"], None):
      first["date"] = date
      arrival = first["scheduled_arrival_time_est"]
      # τ²'s next day: May only, the day number unpadded
      second_date = f"2024-05-{int(date[-2:]) + 1}" if "+1" in arrival else date
      for second in self.direct_flights(second_date, first["destination"],
                                        arguments["destination"], arrival):
        second["date"] = second_date
        pairs.append([first, second])
    return pairs


class SendCertificate(AirlineTool):
  name = "send_certificate"
  description = "Send a certificate to a user. Be careful!"
  parameters: ClassVar[dict[str, Any]] = obj({
      "user_id": USER_ID,
      "amount": described(INTEGER, "The amount of the certificate to send.")})

  def apply(self, arguments: dict[str, Any]) -> str:
    user_id, amount = arguments["user_id"], arguments["amount"]
    user = self.user(user_id)
    for number in NEW_PAYMENT_NUMBERS:
      payment_id = f"certificate_{number}"
      if payment_id not in user["payment_methods"]:
        user["payment_methods"][payment_id] = {"source": "certificate", "id": payment_id,
                                               "amount": float(amount)}
        return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
    raise ToolError("Too many certificates")


class UpdateReservationBaggages(AirlineTool):
  name = "update_reservation_baggages"
  description = "Update the baggage information of a reservation."
  parameters: ClassVar[dict[str, Any]] = obj({
      "reservation_id": RESERVATION_ID,
      "total_baggages": described(INTEGER, "The updated total number of baggage items included"
                                  " in the reservation."),
      "nonfree_baggages": described(INTEGER, "The updated number of non-free baggage items"
                                    " included in the reservation."),
      "payment_id": PAYMENT_ID})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    reservation = self.reservation(arguments["reservation_id"])
    user = self.user(reservation["user_id"])
    total = BAG_FEE * max(0, arguments["nonfree_baggages"] - reservation["nonfree_baggages"])
    payment = self.charge_update(user, arguments["payment_id"], total)
    if payment is not None:
      reservation["payment_history"].append(payment)
    reservation["total_baggages"] = arguments["total_baggages"]
    reservation["nonfree_baggages"] = arguments["nonfree_baggages"]
    return reservation_view(reservation)


class UpdateReservationFlights(AirlineTool):
  name = "update_reservation_flights"
  description = "Update the flight information of a reservation."
  parameters: ClassVar[dict[str, Any]] = obj({
      "reservation_id": RESERVATION_ID,
      "cabin": enum(*CABINS),
      "flights": {"type": "array", "items": FLIGHT_INFO,
                  "description": "An array of objects containing details about each piece of"
                  " flight in the ENTIRE new reservation. Even if the a flight segment is not"
                  " changed, it should still be included in the array."},
      "payment_id": PAYMENT_ID})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    flights = _flight_infos(arguments["flights"])
    reservation = self.reservation(arguments["reservation_id"])
    user = self.user(reservation["user_id"])
    cabin, seats = arguments["cabin"], len(reservation["passengers"])
    total, new_flights = 0, []
    for info in flights:
      kept = next((f for f in reservation["flights"]
                   if f["flight_number"] == info["flight_number"] and f["date"] == info["date"]
                   and cabin == reservation["cabin"]), None)
      if kept is not None:
        total += kept["price"] * seats
        new_flights.append(kept)
        continue
      flight = self.flight(info["flight_number"])
      day = self.bookable(info["flight_number"], info["date"], cabin, seats)
      new_flights.append({"flight_number": info["flight_number"], "origin": flight["origin"],
                          "destination": flight["destination"], "date": info["date"],
                          "price": day["prices"][cabin]})
      total += day["prices"][cabin] * seats
    total -= sum(f["price"] for f in reservation["flights"]) * seats
    payment = self.charge_update(user, arguments["payment_id"], total)
    if payment is not None:
      reservation["payment_history"].append(payment)
    reservation["flights"] = new_flights
    reservation["cabin"] = cabin
    return reservation_view(reservation)


class UpdateReservationPassengers(AirlineTool):
  name = "update_reservation_passengers"
  description = "Update the passenger information of a reservation."
  parameters: ClassVar[dict[str, Any]] = obj({
      "reservation_id": RESERVATION_ID,
      "passengers": {"type": "array", "items": PASSENGER,
                     "description": "An array of objects containing details about each"
                     " passenger."}})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    passengers = _passengers(arguments["passengers"])
    reservation = self.reservation(arguments["reservation_id"])
    if len(passengers) != len(reservation["passengers"]):
      raise ToolError("Number of passengers does not match")
    reservation["passengers"] = passengers
    return reservation_view(reservation)


class GetFlightStatus(AirlineTool):
  name = "get_flight_status"
  description = "Get the status of a flight."
  parameters: ClassVar[dict[str, Any]] = obj({
      "flight_number": described(STRING, "The flight number."),
      "date": described(STRING, "The date of the flight.")})

  def apply(self, arguments: dict[str, Any]) -> str:
    return self.flight_date(arguments["flight_number"], arguments["date"])["status"]


AIRLINE = Domain(
    "airline",
    (BookReservation, Calculate, CancelReservation, GetReservationDetails, GetUserDetails,
     ListAllAirports, SearchDirectFlight, SearchOnestopFlight, SendCertificate,
     TransferToHumanAgents, UpdateReservationBaggages, UpdateReservationFlights,
     UpdateReservationPassengers, GetFlightStatus),
    {}, tables=("flights", "users", "reservations"), solo_policy=None)
