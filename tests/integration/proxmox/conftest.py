"""Fixtures for the Proxmox module tests: `pvesim` (the project's Proxmox VE simulator) over HTTPS with its
own CA on a free loopback port, seeded with the 3-node lab seed, from the shared starter in
`tests/services.py`. Its admin API (`/_pvesim/...`) gives the request log (check mode must show no write)
and fault injection.
"""
from __future__ import annotations

import pytest

from services import running_pvesim


@pytest.fixture
def pvesim(tmp_path):
    with running_pvesim(tmp_path) as sim:
        yield sim
