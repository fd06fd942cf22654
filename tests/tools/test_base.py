"""The never-raise contract of `Tool.call`: validation, exceptions and deadlines become errors."""

import asyncio

from tests.tools.sample_tools import Broken, Echo, Slow
from toolorch_jax.tools import Limits, Price, ToolContext


def call(tool, arguments, context=None):
  return asyncio.run(tool.call(arguments, context))


def test_call_and_its_alias():
  tool = Echo("echo", price=Price(per_call=0.25))
  result = call(tool, {"text": "hi"})
  assert (result.text, result.cost_usd, result.error) == ("hi", 0.25, None)
  assert result.latency_s > 0
  assert asyncio.run(tool({"text": "yo"})).text == "yo"  # __call__ is call
  assert tool.schema() == {"type": "function", "function": {
      "name": "echo", "description": "Echo the text back.", "parameters": Echo.parameters}}


def test_bad_arguments_are_error_results_naming_the_field():
  tool = Echo("echo")
  assert call(tool, {}).error == "bad arguments for 'echo': 'text' is a required property"
  assert call(tool, {"text": 3}).error == "bad arguments for 'echo': 'text': 3 is not of type 'string'"
  assert call(tool, {"text": "a", "x": 1}).error.startswith(
      "bad arguments for 'echo': Additional properties are not allowed ('x' was unexpected)")
  assert call(tool, '{"text": "from json"}').text == "from json"
  assert call(tool, "{oops").error.startswith("bad arguments for 'echo': not valid JSON")
  assert call(tool, [1]).error == "bad arguments for 'echo': expected a JSON object, got list"


def test_exceptions_and_deadlines_are_error_results():
  assert call(Broken("broken"), {"text": "x"}).error == "RuntimeError: boom"
  slow = call(Slow("slow"), {"text": "x"}, ToolContext(timeout_s=0.01))
  assert slow.error == "timed out after 0.01 s (caller's deadline)"


def test_limits_cap_calls_in_flight_per_backend():
  limits = Limits({"shared": 2})
  tools = [Slow("a", backend="shared", limits=limits), Slow("b", backend="shared", limits=limits)]

  async def many():
    return await asyncio.gather(*(tools[i % 2].call({"text": "x"}) for i in range(8)))

  Slow.most = 0
  assert all(r.text == "done" for r in asyncio.run(many()))
  assert Slow.most == 2
  assert asyncio.run(many())  # semaphores are per event loop: a second asyncio.run works
