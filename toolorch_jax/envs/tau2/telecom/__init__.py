"""τ²'s `telecom` domain, dual-control: the agent works on the carrier's db (`carrier.py`), the
user on their own phone (`phone.py`), and the two sides are synced after every call."""

from toolorch_jax.envs.tau2.telecom import carrier, phone
from toolorch_jax.envs.tau2.toolkit import Domain

TELECOM = Domain(
    "telecom", carrier.AGENT_TOOLS, carrier.ASSERTIONS,
    tables=("plans", "customers", "lines", "bills", "devices"),
    solo_policy="main_policy_solo.md+tech_support_manual.md",
    user_tools=phone.USER_TOOLS, user_assertions=phone.USER_ASSERTIONS,
    db_file="db.toml", user_db_file="user_db.toml",
    policy="main_policy.md+tech_support_manual.md",
    functions=carrier.FUNCTIONS, user_functions=phone.USER_FUNCTIONS, sync=phone.sync,
    prepare=carrier.prepare, prepare_user=phone.prepare_user)

__all__ = ["TELECOM"]
