"""awx/ee/install-openshift-clients.sh: the step that puts a release's openshift-install and oc into the
installer cache (the EE build runs it; so can any controller). The tarballs here are shaped like the
mirror's (openshift-install-linux-<v>.tar.gz holding `openshift-install`, openshift-client-linux-<v>.tar.gz
holding `oc`, sha256sum.txt); the installer inside is the project's installer double, which reports the
version it is told to.
"""
from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from testlib import REPO

SCRIPT = REPO / "awx/ee/install-openshift-clients.sh"
INSTALLER_DOUBLE = REPO / "tests/fixtures/bin/openshift-install"
VERSION = "4.19.7"


def tarball(path: Path, member: str, content: bytes) -> None:
    with tarfile.open(path, "w:gz") as tf:
        info = tarfile.TarInfo(member)
        info.size, info.mode = len(content), 0o755
        tf.addfile(info, io.BytesIO(content))


@pytest.fixture
def release(tmp_path) -> Path:
    """A folder with one release's client tarballs and their sha256sum.txt."""
    src = tmp_path / "mirror"
    src.mkdir()
    tarball(src / f"openshift-install-linux-{VERSION}.tar.gz", "openshift-install", INSTALLER_DOUBLE.read_bytes())
    tarball(src / f"openshift-client-linux-{VERSION}.tar.gz", "oc", b"#!/bin/sh\necho 'Client Version: " + VERSION.encode() + b"'\n")
    sums = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in sorted(src.glob("*.tar.gz")))
    (src / "sha256sum.txt").write_text(sums)
    return src


def install(version: str, cache: Path, source: Path | str, reports: str = VERSION):
    env = {**os.environ, "PROXSHIFT_TEST_INSTALLER_VERSION": reports}
    return subprocess.run(["bash", str(SCRIPT), version, str(cache), str(source)],
                          env=env, capture_output=True, text=True, timeout=120)


def test_installs_both_clients_under_the_names_ocp_manifests_looks_for(tmp_path, release):
    cache = tmp_path / "cache"
    proc = install(VERSION, cache, release)
    assert proc.returncode == 0, proc.stderr
    installer, oc = cache / f"openshift-install-{VERSION}", cache / f"oc-{VERSION}"
    assert os.access(installer, os.X_OK) and os.access(oc, os.X_OK)
    assert subprocess.run([str(oc)], capture_output=True, text=True).stdout.strip() == f"Client Version: {VERSION}"
    shown = subprocess.run([str(installer), "version"], capture_output=True, text=True,
                           env={**os.environ, "PROXSHIFT_TEST_INSTALLER_VERSION": VERSION}).stdout
    assert shown.splitlines()[0].endswith(VERSION)


def test_an_installer_of_another_version_is_refused_and_nothing_installed(tmp_path, release):
    cache = tmp_path / "cache"
    proc = install(VERSION, cache, release, reports="4.18.3")
    assert proc.returncode != 0
    assert f"holds openshift-install 4.18.3, not {VERSION}" in proc.stderr, proc.stderr
    assert not cache.exists() or not list(cache.iterdir())


def test_a_tarball_that_does_not_match_its_checksum_is_refused(tmp_path, release):
    bad = release / f"openshift-client-linux-{VERSION}.tar.gz"
    tarball(bad, "oc", b"#!/bin/sh\necho tampered\n")
    proc = install(VERSION, tmp_path / "cache", release)
    assert proc.returncode != 0
    assert f"{bad.name} does not match its sha256sum.txt entry" in proc.stderr, proc.stderr
    assert not (tmp_path / "cache").exists()


def test_a_missing_tarball_or_a_minor_only_version_is_a_clear_error(tmp_path, release):
    proc = install("4.19.8", tmp_path / "cache", release)
    assert proc.returncode != 0
    assert "openshift-install-linux-4.19.8.tar.gz is not in" in proc.stderr, proc.stderr
    proc = install("4.19", tmp_path / "cache", release)
    assert proc.returncode != 0
    assert "VERSION must be an exact release such as 4.19.7" in proc.stderr, proc.stderr
