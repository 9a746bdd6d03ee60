"""The molecule scenario (molecule/default): converge site.yaml, idempotence, verify — against the
simulator and OpenBao this test starts."""
from __future__ import annotations

import subprocess

from testlib import REPO, ansible_env, tool


def test_molecule_default_scenario(site, tmp_path):
    env = ansible_env(tmp_path, {
        "PROXSHIFT_PVE_PORT": str(site.sim.port),
        "PROXSHIFT_PVE_CA": str(site.sim.ca_path),
        "PROXSHIFT_VAULT_ADDR": site.bao.addr,
        "PROXSHIFT_WORK_DIR": str(site.work),
        "PROXMOX_TOKEN_SECRET": site.token_secret,
        "VAULT_TOKEN": site.bao.token,
        "MOLECULE_NO_LOG": "false",
    })
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    proc = subprocess.run([tool("molecule"), "test", "-s", "default"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1200)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "idempotence" in out.lower()
    assert len(site.owned_vms("lab-sno")) == 1
