"""The three collections build into Galaxy tarballs that install and run."""
from __future__ import annotations

import subprocess
import tarfile

import pytest

from testlib import MODULE_BINARIES, REPO, ansible_env, tool

GALAXY_LIMIT = 20 * 1024 * 1024


@pytest.fixture(scope="module")
def built_tarballs(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    env = ansible_env(out)
    tarballs = {}
    for coll in sorted(set(MODULE_BINARIES.values())):
        proc = subprocess.run(
            [tool("ansible-galaxy"), "collection", "build", "--force", "--output-path", str(out),
             str(REPO / "ansible_collections/proxshift" / coll)],
            env=env, capture_output=True, text=True, timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        [tarball] = out.glob(f"proxshift-{coll}-*.tar.gz")
        tarballs[coll] = tarball
    return tarballs


def test_tarballs_hold_executable_binaries_and_nothing_else(built_tarballs):
    for coll, tarball in built_tarballs.items():
        assert tarball.stat().st_size < GALAXY_LIMIT / 4, f"{tarball} is {tarball.stat().st_size} bytes"
        with tarfile.open(tarball) as tf:
            names = tf.getnames()
            for module, owner in MODULE_BINARIES.items():
                if owner != coll:
                    continue
                member = tf.getmember(f"plugins/modules/{module}")
                assert member.mode & 0o111, f"{module} is not executable in {tarball.name}"
                assert f"plugins/modules/{module}.yml" in names
        assert not [n for n in names if n.startswith(("target/", "tests/output"))], names


def test_installed_collections_run(built_tarballs, tmp_path, run_playbook):
    dest = tmp_path / "installed"
    proc = subprocess.run(
        [tool("ansible-galaxy"), "collection", "install", "--offline", "--force", "-p", str(dest), *map(str, built_tarballs.values())],
        env=ansible_env(tmp_path), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    play = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: call with a bad option
      proxshift.openshift.ocp_manifests:
        surely_not_an_option: 1
      ignore_errors: true
"""
    # Only the installed copy is on the collections path.
    run = run_playbook(play, env={"ANSIBLE_COLLECTIONS_PATH": str(dest)})
    result = run.task("call with a bad option")
    assert "Unsupported parameters" in result["msg"], result
    assert run.status("call with a bad option") == "failed"
    assert (dest / "ansible_collections/proxshift/openshift/plugins/modules/ocp_manifests").exists()
