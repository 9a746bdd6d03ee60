"""Helpers shared by every test area: where the repo, venv and built binaries are, how to run
ansible-playbook in isolation, free ports. Fixtures built on them are in `tests/conftest.py`.

Import as `import testlib` (pytest.ini puts `tests/` on sys.path).
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("PROXSHIFT_VENV", REPO / ".venv"))
TEST_COLLECTIONS = REPO / "tests" / "collections"
CALLBACKS = REPO / "tests" / "plugins" / "callback"

MODULE_BINARIES = {
    "proxmox_vm": "proxmox",
    "vm_lifecycle": "proxmox",
    "proxmox_access": "proxmox",
    "hashicorp_vault": "hashi_vault",
    "ocp_manifests": "openshift",
    "acm_import": "openshift",
    "cluster_auth": "openshift",
    "proxmox_vm_info": "proxmox",
    "proxmox_ha": "proxmox",
    "proxmox_snap": "proxmox",
    "hashicorp_vault_info": "hashi_vault",
    "acm_cluster_info": "openshift",
    "cluster_nodes": "openshift",
    "etcd_backup": "openshift",
    "cluster_upgrade": "openshift",
    "cluster_config": "openshift",
}


def collection_binary(coll: str, arch: str = "x86_64") -> Path:
    """A collection's multi-call binary for `arch` (copied into the collection by `make build`)."""
    path = REPO / "ansible_collections/proxshift" / coll / "builds" / f"linux-{arch}" / f"proxshift_{coll}"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make build` first")
    return path


def module_binary(name: str, arch: str = "x86_64") -> Path:
    """A link named after module `name` to its collection's binary for `arch`, which runs the module it is
    started as (a module run directly, as ansible-core runs it, with an args file or --argument-spec)."""
    if name == "protocol_probe":
        path = TEST_COLLECTIONS / "ansible_collections/proxshift_test/probe/plugins/modules/protocol_probe"
        if not path.exists():
            pytest.fail(f"{path} is missing: run `make build` first")
        return path
    target = collection_binary(MODULE_BINARIES[name], arch)
    link = REPO / "build" / "modules" / f"linux-{arch}" / name
    if not (link.is_symlink() and link.resolve() == target.resolve()):
        link.parent.mkdir(parents=True, exist_ok=True)
        tmp = link.with_name(f".{name}.{os.getpid()}")  # atomic: the test workers may race
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        os.replace(tmp, link)
    return link


def tool(name: str, venv: Path = VENV) -> str:
    """An executable from the project venv (ansible-playbook, ansible-doc, ...), or from `venv`."""
    path = venv / "bin" / name
    if not path.exists():
        hint = "run `make venv` first" if venv == VENV else "run `make test-deps` (scripts/deps/) first"
        pytest.fail(f"{path} is missing: {hint}")
    return str(path)


@dataclasses.dataclass(frozen=True)
class AnsibleCore:
    """One ansible-core release in its own venv (scripts/deps/ansible-versions.sh), or the project venv."""

    version: str
    python: str
    venv: Path

    @property
    def id(self) -> str:
        return f"core{'.'.join(self.version.split('.')[:2])}-py{self.python}"


ANSIBLE_VERSIONS_SCRIPT = REPO / "scripts" / "deps" / "ansible-versions.sh"


def _project_ansible_core() -> AnsibleCore:
    import re
    import sys

    pinned = re.search(r"^ansible-core==(\S+)", (REPO / "requirements-dev.txt").read_text(), re.M).group(1)
    return AnsibleCore(pinned, f"{sys.version_info.major}.{sys.version_info.minor}", VENV)


def ansible_core_releases() -> list[AnsibleCore]:
    """Every ansible-core release the protocol suite runs under: the project venv's and the cached venvs
    of scripts/deps/ansible-versions.sh (its RELEASES list is the one place the versions are named)."""
    import re

    listed = re.search(r"^RELEASES=\((.*)\)$", ANSIBLE_VERSIONS_SCRIPT.read_text(), re.M).group(1).split()
    root = Path(os.environ.get("PROXSHIFT_ANSIBLE_VENVS", "/var/cache/proxshift/ansible-core"))
    others = [AnsibleCore(v, py, root / f"{v}-py{py}") for v, py in (r.split(":") for r in listed)]
    return sorted([_project_ansible_core(), *others], key=lambda c: tuple(map(int, c.version.split("."))))


@dataclasses.dataclass
class PlaybookRun:
    rc: int
    stdout: str
    stderr: str
    results: list[dict]

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def task(self, name: str, host: str | None = None) -> dict:
        """The result of the last run of the task called `name`."""
        found = [r for r in self.results if r["task"] == name and (host is None or r["host"] == host)]
        if not found:
            raise AssertionError(f"no result for task {name!r}; tasks seen: {[r['task'] for r in self.results]}")
        return found[-1]["result"]

    def status(self, name: str) -> str:
        found = [r for r in self.results if r["task"] == name]
        if not found:
            raise AssertionError(f"no result for task {name!r}")
        return found[-1]["status"]

    def changed_tasks(self) -> list[str]:
        return [r["task"] for r in self.results if r["result"].get("changed")]


def ansible_env(tmp: Path, extra: dict | None = None, venv: Path = VENV) -> dict:
    """Environment for an isolated ansible run: our collections, our callback, a private ANSIBLE_HOME;
    `venv`'s tools first on PATH (the project venv unless a test picks another ansible-core)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        {
            "ANSIBLE_COLLECTIONS_PATH": f"{REPO}:{TEST_COLLECTIONS}",
            "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
            "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS),
            "ANSIBLE_CALLBACKS_ENABLED": "record",
            "ANSIBLE_HOME": str(tmp / "ansible-home"),
            "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-local"),
            "ANSIBLE_REMOTE_TEMP": str(tmp / "ansible-remote"),
            # Async job files (the full result of an async task, read by async_status) stay with the test
            # and are read by the leak scan: they are on disk where the job ran.
            "ANSIBLE_ASYNC_DIR": str(tmp / "ansible-async"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_RETRY_FILES_ENABLED": "false",
            "ANSIBLE_HOST_KEY_CHECKING": "false",
            "ANSIBLE_DEPRECATION_WARNINGS": "true",
            "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}",
        }
    )
    if extra:
        env.update(extra)
    return env


COLLECTION_NAMES = sorted(set(MODULE_BINARIES.values()))


def string_leaves(value):
    """Every string inside a parsed JSON/YAML value (dict values and list items, recursively)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from string_leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from string_leaves(v)
    elif isinstance(value, str):
        yield value


def build_collection_tarballs(out: Path) -> dict[str, Path]:
    """`ansible-galaxy collection build` of each collection in the checkout (binaries included, so `make
    build` must have run) into `out`: {collection: tarball}."""
    for module in MODULE_BINARIES:
        module_binary(module)  # fails naming `make build` when a binary is missing
    tarballs = {}
    for coll in COLLECTION_NAMES:
        proc = subprocess.run(
            [tool("ansible-galaxy"), "collection", "build", "--force", "--output-path", str(out),
             str(REPO / "ansible_collections/proxshift" / coll)],
            env=ansible_env(out), capture_output=True, text=True, timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        [tarball] = out.glob(f"proxshift-{coll}-*.tar.gz")
        tarballs[coll] = tarball
    return tarballs


def install_collection_tarballs(tarballs: dict[str, Path], dest: Path) -> Path:
    """Install the tarballs into the collections path `dest` (as an execution environment has them)."""
    proc = subprocess.run(
        [tool("ansible-galaxy"), "collection", "install", "--offline", "-p", str(dest), *map(str, tarballs.values())],
        # Only the destination is a collections path: the checkout's copies must not count as installed.
        env=ansible_env(dest, {"ANSIBLE_COLLECTIONS_PATH": str(dest)}), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for coll in tarballs:
        assert f"proxshift.{coll}:" in proc.stdout, proc.stdout
    return dest


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def which_or_fail(name: str, hint: str) -> str:
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} not found: {hint}")
    return found

# The cluster ID the installer double records (PROXSHIFT_TEST_CLUSTER_ID) and the test API server's
# ClusterVersion answers with: one and the same cluster for the record's identity check.
TEST_CLUSTER_ID = "6c1f5a2e-0000-4000-8000-0000000000f1"
# The kubeadmin password the installer double generates and logs at install-complete, as the real
# installer does (tests/fixtures/bin/openshift-install): a canary of the session's leak scan.
KUBEADMIN_PASSWORD_CANARY = "Kcnry-Admin-Passw-Leak1"
# The admin client key of the kubeconfig the installer double writes (auth/kubeconfig's client-key-data, a PEM
# block base64-encoded): a canary of the leak scan, whole, decoded and line by line.
ADMIN_CLIENT_KEY_CANARY = "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUtjbnJ5QWRtaW5DbGllbnRLZXlMZWFrU2NhbjBmMGZDYW5hcnkyMDI2b0FvR0NDcUdTTTQ5QXdFSAotLS0tLUVORCBFQyBQUklWQVRFIEtFWS0tLS0tCg=="


def fleet_inventory(dest: Path, names: list[str], bad: str | None = None, memory_mib: int = 24576) -> Path:
    """An inventory folder for a fleet (tests/integration/flow/test_fleet.py, `make bench`'s fleet row): the
    example site settings, and one SNO cluster per name (its own network, MAC and `memory_mib` VM); `bad`, a
    cluster whose node address is outside its machine network (its preflight refuses it)."""
    import shutil

    import yaml

    def cluster(i: int, host: str, ip: str) -> dict:
        return {
            "vars": {
                "ocp_version": "4.19", "base_domain": "fleet.example.com", "machine_network": f"10.40.{i}.0/24",
                "gateway": f"10.40.{i}.1", "dns_servers": [f"10.40.{i}.2"],
                "vm_defaults": {"memory": memory_mib, "cores": 4,
                                "disks": [{"slot": "scsi0", "storage": "local-lvm", "size": "120G"}],
                                "nics": [{"slot": "net0", "bridge": "vmbr0"}]},
            },
            "hosts": {host: {"ip": ip, "mac": f"BC:24:11:40:{i:02X}:11"}},
        }

    shutil.copytree(REPO / "inventory" / "group_vars", dest / "group_vars")
    children = {name: cluster(i, f"{name}-0", f"10.40.{i}.11") for i, name in enumerate(names)}
    if bad:
        children[bad] = cluster(len(names), f"{bad}-0", "192.0.2.99")
    (dest / "fleet.yml").write_text(yaml.safe_dump({"all": {"children": {"clusters": {"children": children}}}}))
    return dest


def stop_process(proc: subprocess.Popen, timeout: float = 10) -> None:
    """Terminate a service the tests started, killing it when it does not exit within `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
