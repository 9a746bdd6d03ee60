"""Fixtures for the reliability suite: the shared service starters (tests/services.py), the shared
kube-apiserver fixture (tests/kube_fixtures.py) and the openshift area's ACM helpers (imported, not
copied), plus the lab seed extended with the identity the fault matrix needs (an expired token).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from services import LAB_SEED, running_openbao, running_pvesim

# The 409 case reuses the openshift area's import-secret builder (test_acm_import.import_secret).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "openshift"))
from kube_fixtures import kube_api, spoke_api  # noqa: E402,F401  (fixtures)

from reliability_lib import EXPIRED_TOKEN_SECRET  # noqa: E402


@pytest.fixture
def sim(tmp_path):
    """pvesim (lab seed + an expired root token), tasks at 2% of real durations."""
    seed = yaml.safe_load(LAB_SEED.read_text())
    seed["tokens"].append({"userid": "root@pam", "tokenid": "expired", "secret": EXPIRED_TOKEN_SECRET,
                           "privsep": False, "expire": 1})
    path = tmp_path / "seed.yaml"
    path.write_text(yaml.safe_dump(seed))
    with running_pvesim(tmp_path, seed=path) as s:
        yield s


@pytest.fixture
def bao(tmp_path):
    (tmp_path / "bao").mkdir()
    with running_openbao(tmp_path / "bao") as server:
        yield server
