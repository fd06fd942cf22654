"""The τ² domains implemented here, by the name `env.settings.domain` gives."""

from __future__ import annotations

from toolorch_jax.envs.tau2.airline import AIRLINE
from toolorch_jax.envs.tau2.mock_tools import MOCK
from toolorch_jax.envs.tau2.retail import RETAIL
from toolorch_jax.envs.tau2.telecom import TELECOM
from toolorch_jax.envs.tau2.toolkit import Domain

DOMAINS: dict[str, Domain] = {domain.name: domain for domain in (MOCK, AIRLINE, RETAIL, TELECOM)}
