"""Fixtures of the OpenShift area besides kube_fixtures.py: an OpenBao for the roles that also talk to Vault."""
from __future__ import annotations

import pytest

from services import running_openbao


@pytest.fixture(scope="module")
def openbao(tmp_path_factory):
    """A dev-mode OpenBao shared by one test module (KV v2 at secret/, root token services.BAO_ROOT_TOKEN)."""
    with running_openbao(tmp_path_factory.mktemp("bao")) as server:
        yield server
