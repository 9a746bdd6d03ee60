"""The protocol suite runs under every supported ansible-core: 2.16 and 2.18 (cached venvs of
scripts/deps/ansible-versions.sh), 2.19 (the project venv) and the newest 2.2x. Every test that runs a
playbook (through `run_playbook`) or a tool of `ansible_venv` is parametrised by release, with that
release's venv first on PATH and its Python as the interpreter; tests that run a binary directly are not.
"""
from __future__ import annotations

import pytest

from testlib import ansible_core_releases

RELEASES = ansible_core_releases()


@pytest.fixture(params=RELEASES, ids=[r.id for r in RELEASES])
def ansible_core(request):
    release = request.param
    if not (release.venv / "bin" / "ansible-playbook").exists():
        pytest.fail(f"{release.venv} has no ansible-core {release.version}: run scripts/deps/ansible-versions.sh "
                    "(part of `make test-deps`)")
    return release


@pytest.fixture
def ansible_venv(ansible_core):
    return ansible_core.venv
