"""τ²'s `retail` domain: products with variants, users with payment methods, orders.

Our own code over `tau2/domains/retail/db.json`, giving the outputs and errors τ²'s retail tools
give for the same calls, quirks included: modifying several pending items gives each the price
and options of the last new item, and only pending orders can be cancelled or have items
modified while "pending (item modified)" ones may still change address or payment.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from toolorch_jax.envs.tau2.shared import (STRING, STRINGS, Calculate, TransferToHumanAgents,
                                           described, obj)
from toolorch_jax.envs.tau2.toolkit import Domain, DomainTool
from toolorch_jax.tools.base import ToolError

CANCEL_REASONS = ("no longer needed", "ordered by mistake")
ORDER_FIELDS = ("order_id", "user_id", "address", "items", "status", "fulfillments",
                "payment_history", "cancel_reason", "exchange_items", "exchange_new_items",
                "exchange_payment_method_id", "exchange_price_difference", "return_items",
                "return_payment_method_id")
ADDRESS_FIELDS = ("address1", "address2", "city", "country", "state", "zip")

ORDER_ID = described(STRING, "The order id, such as '#W0000000'. Be careful there is a '#' symbol"
                     " at the beginning of the order id.")
USER_ID = described(STRING, "The user id, such as 'sara_doe_496'.")
PAYMENT_METHOD_ID = described(STRING, "The payment method id to pay or receive refund for the"
                              " item price difference, such as 'gift_card_0000000' or"
                              " 'credit_card_0000000'. These can be looked up from the user or"
                              " order details.")
ADDRESS = {"address1": described(STRING, "The first line of the address, such as '123 Main St'."),
           "address2": described(STRING, "The second line of the address, such as 'Apt 1' or ''."),
           "city": described(STRING, "The city, such as 'San Francisco'."),
           "state": described(STRING, "The state, such as 'CA'."),
           "country": described(STRING, "The country, such as 'USA'."),
           "zip": described(STRING, "The zip code, such as '12345'.")}


def order_view(order: dict[str, Any]) -> dict[str, Any]:
  """An order with every field of τ²'s model (the exchange, return and cancel ones null)."""
  return {key: order.get(key) for key in ORDER_FIELDS}


class RetailTool(DomainTool):
  """Lookups shared by the retail tools, failing with τ²'s messages."""

  def order(self, order_id: str) -> dict[str, Any]:
    if order_id not in self.db.data["orders"]:
      raise ToolError("Order not found")
    return self.db.data["orders"][order_id]

  def user(self, user_id: str) -> dict[str, Any]:
    if user_id not in self.db.data["users"]:
      raise ToolError("User not found")
    return self.db.data["users"][user_id]

  def product(self, product_id: str) -> dict[str, Any]:
    if product_id not in self.db.data["products"]:
      raise ToolError("Product not found")
    return self.db.data["products"][product_id]

  def variant(self, product_id: str, item_id: str) -> dict[str, Any]:
    product = self.product(product_id)
    if item_id not in product["variants"]:
      raise ToolError("Variant not found")
    return product["variants"][item_id]

  def payment_method(self, user_id: str, payment_method_id: str) -> dict[str, Any]:
    user = self.user(user_id)
    if payment_method_id not in user["payment_methods"]:
      raise ToolError("Payment method not found")
    return user["payment_methods"][payment_method_id]

  def price_difference(self, order: dict[str, Any], item_ids: list[str], new_item_ids: list[str],
                       distinct: bool = False) -> tuple[float, dict[str, Any] | None]:
    """Sum of new minus old prices over the pairs, and the last new variant (τ² keeps it);
    `distinct` refuses a pair that changes nothing."""
    difference, variant = 0, None
    for item_id, new_item_id in zip(item_ids, new_item_ids):
      if distinct and item_id == new_item_id:
        raise ToolError("The new item id should be different from the old item id")
      item = next((item for item in order["items"] if item["item_id"] == item_id), None)
      if item is None:
        raise ToolError(f"Item {item_id} not found")
      variant = self.variant(item["product_id"], new_item_id)
      if not variant["available"]:
        raise ToolError(f"New item {new_item_id} not found or available")
      difference += variant["price"] - item["price"]
    return difference, variant


def _check_counts(order: dict[str, Any], item_ids: list[str], message: str) -> None:
  """Each id asked for at most as often as the order holds it; `message` may name `{item}`."""
  held = [item["item_id"] for item in order["items"]]
  for item_id in item_ids:
    if item_ids.count(item_id) > held.count(item_id):
      raise ToolError(message.format(item=item_id))


class CancelPendingOrder(RetailTool):
  name = "cancel_pending_order"
  description = ("Cancel a pending order. If the order is already processed or delivered, it"
                 " cannot be cancelled. The agent needs to explain the cancellation detail and ask"
                 " for explicit user confirmation (yes/no) to proceed. If the user confirms, the"
                 " order status will be changed to 'cancelled' and the payment will be refunded."
                 " The refund will be added to the user's gift card balance immediately if the"
                 " payment was made using a gift card, otherwise the refund would take 5-7"
                 " business days to process.")
  parameters: ClassVar[dict[str, Any]] = obj({
      "order_id": ORDER_ID,
      "reason": described(STRING, "The reason for cancellation, which should be either 'no"
                          " longer needed' or 'ordered by mistake'.")})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    order = self.order(arguments["order_id"])
    if order["status"] != "pending":
      raise ToolError("Non-pending order cannot be cancelled")
    if arguments["reason"] not in CANCEL_REASONS:
      raise ToolError("Invalid reason")
    refunds = []
    for payment in order["payment_history"]:
      refunds.append({"transaction_type": "refund", "amount": payment["amount"],
                      "payment_method_id": payment["payment_method_id"]})
      user = self.user(order["user_id"])
      method = self.payment_method(user["user_id"], payment["payment_method_id"])
      if method["source"] == "gift_card":
        method["balance"] = round(method["balance"] + payment["amount"], 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = arguments["reason"]
    order["payment_history"].extend(refunds)
    return order_view(order)


class ExchangeDeliveredOrderItems(RetailTool):
  name = "exchange_delivered_order_items"
  description = ("Exchange items in a delivered order to new items of the same product type. For"
                 " a delivered order, return or exchange can be only done once by the agent. The"
                 " agent needs to explain the exchange detail and ask for explicit user"
                 " confirmation (yes/no) to proceed.")
  parameters: ClassVar[dict[str, Any]] = obj({
      "order_id": ORDER_ID,
      "item_ids": described(STRINGS, "The item ids to be exchanged, each such as '1008292230'."
                            " There could be duplicate items in the list."),
      "new_item_ids": described(STRINGS, "The item ids to be exchanged for, each such as"
                                " '1008292230'. There could be duplicate items in the list. Each"
                                " new item id should match the item id in the same position and"
                                " be of the same product."),
      "payment_method_id": PAYMENT_METHOD_ID})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    item_ids, new_item_ids = arguments["item_ids"], arguments["new_item_ids"]
    order = self.order(arguments["order_id"])
    if order["status"] != "delivered":
      raise ToolError("Non-delivered order cannot be exchanged")
    _check_counts(order, item_ids, "Number of {item} not found.")
    if len(item_ids) != len(new_item_ids):
      raise ToolError("The number of items to be exchanged should match.")
    difference, _ = self.price_difference(order, item_ids, new_item_ids)
    difference = round(difference, 2)
    method = self.payment_method(order["user_id"], arguments["payment_method_id"])
    if method["source"] == "gift_card" and method["balance"] < difference:
      raise ToolError("Insufficient gift card balance to pay for the price difference")
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = arguments["payment_method_id"]
    order["exchange_price_difference"] = difference
    return order_view(order)


class FindUserIdByNameZip(RetailTool):
  name = "find_user_id_by_name_zip"
  description = ("Find user id by first name, last name, and zip code. If the user is not found,"
                 " the function will return an error message. By default, find user id by email,"
                 " and only call this function if the user is not found by email or cannot"
                 " remember email.")
  parameters: ClassVar[dict[str, Any]] = obj({
      "first_name": described(STRING, "The first name of the customer, such as 'John'."),
      "last_name": described(STRING, "The last name of the customer, such as 'Doe'."),
      "zip": described(STRING, "The zip code of the customer, such as '12345'.")})

  def apply(self, arguments: dict[str, Any]) -> str:
    for user_id, user in self.db.data["users"].items():
      if (user["name"]["first_name"].lower() == arguments["first_name"].lower()
          and user["name"]["last_name"].lower() == arguments["last_name"].lower()
          and user["address"]["zip"] == arguments["zip"]):
        return user_id
    raise ToolError("User not found")


class FindUserIdByEmail(RetailTool):
  name = "find_user_id_by_email"
  description = "Find user id by email. If the user is not found, the function will return an" \
                " error message."
  parameters: ClassVar[dict[str, Any]] = obj(
      {"email": described(STRING, "The email of the user, such as 'something@example.com'.")})

  def apply(self, arguments: dict[str, Any]) -> str:
    for user_id, user in self.db.data["users"].items():
      if user["email"].lower() == arguments["email"].lower():
        return user_id
    raise ToolError("User not found")


class GetOrderDetails(RetailTool):
  name = "get_order_details"
  description = "Get the status and details of an order."
  parameters: ClassVar[dict[str, Any]] = obj({"order_id": ORDER_ID})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    return order_view(self.order(arguments["order_id"]))


class GetProductDetails(RetailTool):
  name = "get_product_details"
  description = "Get the inventory details of a product."
  parameters: ClassVar[dict[str, Any]] = obj({"product_id": described(
      STRING, "The product id, such as '6086499569'. Be careful the product id is different from"
      " the item id.")})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    return self.product(arguments["product_id"])


class GetUserDetails(RetailTool):
  name = "get_user_details"
  description = "Get the details of a user, including their orders."
  parameters: ClassVar[dict[str, Any]] = obj({"user_id": USER_ID})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    return self.user(arguments["user_id"])


class ListAllProductTypes(RetailTool):
  name = "list_all_product_types"
  description = ("List the name and product id of all product types. Each product type has a"
                 " variety of different items with unique item ids and options. There are only 50"
                 " product types in the store.")
  parameters: ClassVar[dict[str, Any]] = obj({})

  def apply(self, arguments: dict[str, Any]) -> str:
    names = {p["name"]: p["product_id"] for p in self.db.data["products"].values()}
    return json.dumps(names, sort_keys=True)


class ModifyPendingOrderAddress(RetailTool):
  name = "modify_pending_order_address"
  description = ("Modify the shipping address of a pending order. The agent needs to explain the"
                 " modification detail and ask for explicit user confirmation (yes/no) to"
                 " proceed.")
  parameters: ClassVar[dict[str, Any]] = obj({"order_id": ORDER_ID, **ADDRESS})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    order = self.order(arguments["order_id"])
    if "pending" not in order["status"]:
      raise ToolError("Non-pending order cannot be modified")
    order["address"] = {key: arguments[key] for key in ADDRESS_FIELDS}
    return order_view(order)


class ModifyPendingOrderItems(RetailTool):
  name = "modify_pending_order_items"
  description = ("Modify items in a pending order to new items of the same product type. For a"
                 " pending order, this function can only be called once. The agent needs to"
                 " explain the exchange detail and ask for explicit user confirmation (yes/no) to"
                 " proceed.")
  parameters: ClassVar[dict[str, Any]] = obj({
      "order_id": ORDER_ID,
      "item_ids": described(STRINGS, "The item ids to be modified, each such as '1008292230'."
                            " There could be duplicate items in the list."),
      "new_item_ids": described(STRINGS, "The item ids to be modified for, each such as"
                                " '1008292230'. There could be duplicate items in the list. Each"
                                " new item id should match the item id in the same position and"
                                " be of the same product."),
      "payment_method_id": PAYMENT_METHOD_ID})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    item_ids, new_item_ids = arguments["item_ids"], arguments["new_item_ids"]
    order = self.order(arguments["order_id"])
    if order["status"] != "pending":
      raise ToolError("Non-pending order cannot be modified")
    _check_counts(order, item_ids, "{item} not found")
    if len(item_ids) != len(new_item_ids):
      raise ToolError("The number of items to be exchanged should match")
    difference, variant = self.price_difference(order, item_ids, new_item_ids, distinct=True)
    method_id = arguments["payment_method_id"]
    method = self.payment_method(order["user_id"], method_id)
    if method["source"] == "gift_card" and method["balance"] < difference:
      raise ToolError("Insufficient gift card balance to pay for the new item")
    order["payment_history"].append({
        "transaction_type": "payment" if difference > 0 else "refund",
        "amount": abs(difference), "payment_method_id": method_id})
    if method["source"] == "gift_card":
      method["balance"] = round(method["balance"] - difference, 2)
    for item_id, new_item_id in zip(item_ids, new_item_ids):
      item = next(item for item in order["items"] if item["item_id"] == item_id)
      item["item_id"] = new_item_id
      item["price"] = variant["price"]
      item["options"] = dict(variant["options"])
    order["status"] = "pending (item modified)"
    return order_view(order)


class ModifyPendingOrderPayment(RetailTool):
  name = "modify_pending_order_payment"
  description = ("Modify the payment method of a pending order. The agent needs to explain the"
                 " modification detail and ask for explicit user confirmation (yes/no) to"
                 " proceed.")
  parameters: ClassVar[dict[str, Any]] = obj({
      "order_id": ORDER_ID,
      "payment_method_id": described(STRING, "The payment method id to pay or receive refund for"
                                     " the item price difference, such as 'gift_card_0000000' or"
                                     " 'credit_card_0000000'. These can be looked up from the"
                                     " user or order details.")})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    order = self.order(arguments["order_id"])
    if "pending" not in order["status"]:
      raise ToolError("Non-pending order cannot be modified")
    method_id = arguments["payment_method_id"]
    method = self.payment_method(order["user_id"], method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
      raise ToolError("There should be exactly one payment for a pending order")
    if history[0]["payment_method_id"] == method_id:
      raise ToolError("The new payment method should be different from the current one")
    amount, old_id = history[0]["amount"], history[0]["payment_method_id"]
    if method["source"] == "gift_card" and method["balance"] < amount:
      raise ToolError("Insufficient gift card balance to pay for the order")
    history.extend([
        {"transaction_type": "payment", "amount": amount, "payment_method_id": method_id},
        {"transaction_type": "refund", "amount": amount, "payment_method_id": old_id}])
    if method["source"] == "gift_card":
      method["balance"] = round(method["balance"] - amount, 2)
    old_method = self.payment_method(order["user_id"], old_id)
    if old_method["source"] == "gift_card":
      old_method["balance"] = round(old_method["balance"] + amount, 2)
    return order_view(order)


class ModifyUserAddress(RetailTool):
  name = "modify_user_address"
  description = ("Modify the default address of a user. The agent needs to explain the"
                 " modification detail and ask for explicit user confirmation (yes/no) to"
                 " proceed.")
  parameters: ClassVar[dict[str, Any]] = obj({"user_id": USER_ID, **ADDRESS})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    user = self.user(arguments["user_id"])
    user["address"] = {key: arguments[key] for key in ADDRESS_FIELDS}
    return user


class ReturnDeliveredOrderItems(RetailTool):
  name = "return_delivered_order_items"
  description = ("Return some items of a delivered order. The order status will be changed to"
                 " 'return requested'. The agent needs to explain the return detail and ask for"
                 " explicit user confirmation (yes/no) to proceed. The user will receive follow-up"
                 " email for how and where to return the item.")
  parameters: ClassVar[dict[str, Any]] = obj({
      "order_id": ORDER_ID,
      "item_ids": described(STRINGS, "The item ids to be returned, each such as '1008292230'."
                            " There could be duplicate items in the list."),
      "payment_method_id": described(STRING, "The payment method id to pay or receive refund for"
                                     " the item price difference, such as 'gift_card_0000000' or"
                                     " 'credit_card_0000000'. These can be looked up from the"
                                     " user or order details.")})

  def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
    item_ids, method_id = arguments["item_ids"], arguments["payment_method_id"]
    order = self.order(arguments["order_id"])
    if order["status"] != "delivered":
      raise ToolError("Non-delivered order cannot be returned")
    user = self.user(order["user_id"])
    method = self.payment_method(user["user_id"], method_id)
    if (method["source"] != "gift_card"
        and method_id != order["payment_history"][0]["payment_method_id"]):
      raise ToolError("Payment method should be the original payment method")
    _check_counts(order, item_ids, "Some item not found")
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = method_id
    return order_view(order)


RETAIL = Domain(
    "retail",
    (Calculate, CancelPendingOrder, ExchangeDeliveredOrderItems, FindUserIdByNameZip,
     FindUserIdByEmail, GetOrderDetails, GetProductDetails, GetUserDetails, ListAllProductTypes,
     ModifyPendingOrderAddress, ModifyPendingOrderItems, ModifyPendingOrderPayment,
     ModifyUserAddress, ReturnDeliveredOrderItems, TransferToHumanAgents),
    {}, tables=("products", "users", "orders"), solo_policy=None)
