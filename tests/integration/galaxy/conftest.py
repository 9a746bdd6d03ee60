"""The collections as Galaxy ships them: `ansible-galaxy collection build` tarballs of the checkout
(with the binaries `make build` put in) installed with `ansible-galaxy collection install` into a clean
collections path, as an execution environment or a Galaxy user has them."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from services import running_openbao
from testlib import MODULE_BINARIES, REPO, ansible_env, module_binary, tool

COLLECTIONS = sorted(set(MODULE_BINARIES.values()))


@pytest.fixture(scope="session")
def built_tarballs(tmp_path_factory) -> dict[str, Path]:
    """One tarball per collection, built from the checkout."""
    for module in MODULE_BINARIES:
        module_binary(module)  # fails naming `make build` when a binary is missing
    out = tmp_path_factory.mktemp("dist")
    tarballs = {}
    for coll in COLLECTIONS:
        proc = subprocess.run(
            [tool("ansible-galaxy"), "collection", "build", "--force", "--output-path", str(out),
             str(REPO / "ansible_collections/proxshift" / coll)],
            env=ansible_env(out), capture_output=True, text=True, timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        [tarball] = out.glob(f"proxshift-{coll}-*.tar.gz")
        tarballs[coll] = tarball
    return tarballs


@pytest.fixture(scope="session")
def installed_collections(built_tarballs, tmp_path_factory) -> Path:
    """A clean collections path holding only the three installed tarballs."""
    dest = tmp_path_factory.mktemp("installed")
    proc = subprocess.run(
        [tool("ansible-galaxy"), "collection", "install", "--offline", "-p", str(dest),
         *map(str, built_tarballs.values())],
        # Only the empty destination is a collections path: the checkout's copies must not count as installed.
        env=ansible_env(dest, {"ANSIBLE_COLLECTIONS_PATH": str(dest)}), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for coll in COLLECTIONS:
        assert f"proxshift.{coll}:" in proc.stdout, proc.stdout
    return dest


@pytest.fixture
def openbao(tmp_path):
    """A fresh dev-mode OpenBao: KV v2 at secret/, root token services.BAO_ROOT_TOKEN."""
    with running_openbao(tmp_path) as server:
        yield server
