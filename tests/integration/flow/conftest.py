"""Fixtures for the end-to-end flow tests: pvesim seeded with the demo layout, a dev OpenBao holding the
install secrets, and a helper that runs the project's playbooks against both with the example inventories.
"""
from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from services import DEMO_SEED, nmstatectl_bin, running_openbao, running_pvesim
from testlib import REPO, TEST_CLUSTER_ID as CLUSTER_ID

# The demo seed's least-privilege token (ProxShiftProvisioner on /), not root's.
TOKEN_SECRET = "0d3e6f2a-demo-4b1c-9c55-proxshift0001"
# Canary values: they must never appear in any output. The Proxmox token's secret is one too (the session's
# leak scan registers constants named *CANARY*).
PROXMOX_TOKEN_CANARY = TOKEN_SECRET
CANARY_PULL_SECRET = json.dumps({"auths": {"registry.example.com": {"auth": "Y2FuYXJ5OnB1bGwtc2VjcmV0LTkxNzM="}}})
SSH_KEY = "ssh-ed25519 " + base64.b64encode(b"\0\0\0\x0bssh-ed25519\0\0\0\x20" + bytes(range(32))).decode() + " flow@test"
INSTALLER_DOUBLE = REPO / "tests" / "fixtures" / "bin"


@dataclass
class Site:
    sim: object
    bao: object
    work: Path
    canary: str = CANARY_PULL_SECRET
    token_secret: str = TOKEN_SECRET

    def extra_vars(self, cluster: str, **more) -> dict:
        return {
            "cluster_name": cluster,
            "proxmox_api_host": self.sim.host,
            "proxmox_api_port": self.sim.port,
            "proxmox_api_user": "proxshift@pve",
            "proxmox_api_token_id": "ansible",
            "proxmox_ca_path": str(self.sim.ca_path),
            "proxmox_allowed_nodes": ["pve1", "pve2", "pve3"],
            "proxmox_vmid_range": [4100, 4199],
            "vault_url": self.bao.addr,
            "proxshift_work_dir": str(self.work),
            "preflight_check_dns": False,
            # The cluster is played ready before the run: two looks a second apart make it stable.
            "cluster_ready_stable_polls": 2,
            "cluster_ready_poll_interval": 1,
            **more,
        }

    def env(self, with_installer: bool = False) -> dict:
        env = {"PROXMOX_TOKEN_SECRET": TOKEN_SECRET, "VAULT_TOKEN": self.bao.token}
        # A build host has nmstatectl (openshift-install needs it for static networking; preflight checks).
        path = f"{nmstatectl_bin().parent}:{os.environ.get('PATH', '')}"
        env["PATH"] = f"{INSTALLER_DOUBLE}:{path}" if with_installer else path
        if with_installer:
            env["PROXSHIFT_TEST_CLUSTER_ID"] = CLUSTER_ID
        return env

    def record(self, cluster: str) -> dict | None:
        """The cluster's record in Vault (latest version)."""
        return self.bao.kv_get(f"openshift/clusters/{cluster}")

    def record_version(self, cluster: str) -> int:
        status, meta = self.bao.api("GET", f"secret/metadata/openshift/clusters/{cluster}")
        return meta["data"]["current_version"] if status == 200 else 0

    def owned_vms(self, cluster: str) -> list[dict]:
        tag = f"proxshift-{cluster}"
        return [vm for vm in self.sim.state()["vms"] if tag in str(vm["config"].get("tags", "")).split(";")]


@pytest.fixture
def site(tmp_path, request):
    """pvesim on the demo seed and OpenBao. A test may change pvesim through indirect parametrization: a list is
    more arguments (`["--pve-version", "8.4.1"]`), a dict `{"args": [...], "storages": {node: [storage, ...]}}` also
    adds storages to the seed's nodes."""
    (tmp_path / "sim").mkdir()
    (tmp_path / "bao").mkdir()
    param = getattr(request, "param", None) or {}
    param = param if isinstance(param, dict) else {"args": param}
    seed = DEMO_SEED
    if param.get("storages"):
        data = yaml.safe_load(DEMO_SEED.read_text())
        for node in data["nodes"]:
            node["storages"] += param["storages"].get(node["name"], [])
        seed = tmp_path / "sim" / "seed.yaml"
        seed.write_text(yaml.safe_dump(data))
    with running_pvesim(tmp_path / "sim", seed=seed, extra=param.get("args")) as sim, \
            running_openbao(tmp_path / "bao") as bao:
        bao.kv_put("openshift/pull-secret", {"pullSecret": CANARY_PULL_SECRET})
        bao.kv_put("openshift/ssh", {"publicKey": SSH_KEY})
        yield Site(sim=sim, bao=bao, work=tmp_path / "work")


@pytest.fixture
def run_flow(run_playbook, site):
    """Run one of the project's playbooks for a cluster of the example inventories."""

    def run(playbook: str, cluster: str, *, with_installer: bool = False, env_more: dict | None = None, **kwargs):
        extra = site.extra_vars(cluster, **kwargs.pop("extra", {}))
        return run_playbook(
            REPO / "playbooks" / playbook,
            inventory=kwargs.pop("inventory", REPO / "inventory"),
            extra_vars=extra,
            env={**site.env(with_installer), **(env_more or {})},
            **kwargs,
        )

    return run
