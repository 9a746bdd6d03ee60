"""The collections as Galaxy ships them: `ansible-galaxy collection build` tarballs of the checkout
(with the binaries `make build` put in) installed with `ansible-galaxy collection install` into a clean
collections path, as an execution environment or a Galaxy user has them."""
from __future__ import annotations

from pathlib import Path

import pytest

from services import running_openbao
from testlib import build_collection_tarballs, install_collection_tarballs


@pytest.fixture(scope="session")
def built_tarballs(tmp_path_factory) -> dict[str, Path]:
    """One tarball per collection, built from the checkout."""
    return build_collection_tarballs(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def installed_collections(built_tarballs, tmp_path_factory) -> Path:
    """A clean collections path holding only the three installed tarballs."""
    return install_collection_tarballs(built_tarballs, tmp_path_factory.mktemp("installed"))


@pytest.fixture
def openbao(tmp_path):
    """A fresh dev-mode OpenBao: KV v2 at secret/, root token services.BAO_ROOT_TOKEN."""
    with running_openbao(tmp_path) as server:
        yield server
