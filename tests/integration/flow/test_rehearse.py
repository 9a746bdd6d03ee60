"""`proxshift rehearse` end to end: the demo inventory on a copy of the demo layout with an overcommitted
node and a MAC conflict (given as a pvesim seed, and read-only from a "real" Proxmox), through the real
pvesim, ansible-playbook and module binaries. The rehearsal reports both problems and the VMs it would
create, and sends nothing but GETs to the real Proxmox.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from services import DEMO_SEED, pvesim_bin, running_pvesim
from testlib import REPO, ansible_env

DEMO_INVENTORY = REPO / "demo" / "inventory"
# The demo seed's least-privilege token (simulator only); `conftest` names are ambiguous across areas.
TOKEN_SECRET = yaml.safe_load(DEMO_SEED.read_text())["tokens"][0]["secret"]


def derived_mac(cluster: str, host: str) -> str:
    """The MAC playbooks/tasks/cluster_model.yml derives for a host without one."""
    h = hashlib.sha1(f"{cluster}/{host}".encode()).hexdigest()[:6].upper()
    return f"BC:24:11:{h[0:2]}:{h[2:4]}:{h[4:6]}"


CONFLICT_MAC = derived_mac("demo", "demo-master-1")


def troubled_seed(path: Path) -> Path:
    """The demo layout plus a VM that overcommits pve3 (80 GiB on 64 GiB) and one holding the MAC the
    flow will give demo-master-1."""
    seed = yaml.safe_load(DEMO_SEED.read_text())
    seed["vms"] += [
        {"vmid": 200, "node": "pve3", "running": True,
         "config": {"name": "db", "memory": "81920", "cores": 8, "scsi0": "local-lvm:vm-200-disk-0,size=50G",
                    "net0": "virtio=BC:24:11:00:02:00,bridge=vmbr0"}},
        {"vmid": 201, "node": "pve2", "running": False,
         "config": {"name": "old-master", "memory": "4096", "cores": 2, "scsi0": "local-lvm:vm-201-disk-0,size=20G",
                    "net0": f"virtio={CONFLICT_MAC},bridge=vmbr0"}},
    ]
    path.write_text(yaml.safe_dump(seed))
    return path


def proxshift_bin() -> Path:
    path = pvesim_bin().parent / "proxshift"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make build` (it builds proxshift next to pvesim)")
    return path


def rehearse(tmp_path: Path, inventory: Path, *args: str, env: dict | None = None) -> tuple[int, dict, str]:
    run_env = ansible_env(tmp_path)
    # proxshift adds its own phase callback; the test recorder is not needed here.
    for k in ("ANSIBLE_CALLBACK_PLUGINS", "ANSIBLE_CALLBACKS_ENABLED"):
        run_env.pop(k, None)
    for k in [k for k in run_env if k.startswith("PROXMOX_")]:
        del run_env[k]
    run_env.update(env or {})
    proc = subprocess.run(
        [str(proxshift_bin()), "--json", "--project-dir", str(REPO), "-i", str(inventory),
         "rehearse", "demo", "--out", str(tmp_path / "rehearsal"), *args],
        env=run_env, capture_output=True, text=True, timeout=900, cwd=str(tmp_path),
    )
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"no JSON report (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, report, proc.stderr


def assert_reports_overcommit_and_mac_conflict(report: dict, stderr: str):
    kinds = {(p["kind"], p["source"]) for p in report["problems"]}
    assert ("memory", "layout") in kinds and ("mac", "layout") in kinds, json.dumps(report, indent=1) + stderr
    memory = next(p["message"] for p in report["problems"] if p["kind"] == "memory")
    assert memory.startswith("node pve3 is overcommitted: its VMs are given 80.0 GiB of memory, the node has 64.0 GiB"), memory
    mac = next(p["message"] for p in report["problems"] if p["kind"] == "mac")
    assert f"MAC {CONFLICT_MAC} of demo-master-1 is already used by VM 201 (old-master) on pve2" in mac, mac
    assert report["status"] == "failed" and report["exit_code"] == 1
    # What would be created, where: three masters, none on the overcommitted node, VMIDs from the range.
    created = {c["name"]: c for c in report["created"]}
    assert sorted(created) == ["demo-master-0", "demo-master-1", "demo-master-2"], report["created"]
    for c in created.values():
        assert c["node"] in ("pve1", "pve2") and 4100 <= c["vmid"] <= 4199 and c["running"], c
        assert c["memory_mib"] == 24576, c
    assert created["demo-master-1"]["macs"] == [CONFLICT_MAC]
    assert created["demo-master-0"]["macs"] == [derived_mac("demo", "demo-master-0")]


def test_rehearse_on_a_seed_reports_overcommit_and_mac_conflict(tmp_path):
    seed = troubled_seed(tmp_path / "troubled-seed.yaml")
    rc, report, stderr = rehearse(tmp_path, DEMO_INVENTORY, "--seed", str(seed))
    assert rc == 1, stderr
    assert report["layout_source"] == f"seed {seed}"
    assert report["ansible_rc"] == 0, stderr  # the run itself passes: only the rehearsal sees the clash
    assert_reports_overcommit_and_mac_conflict(report, stderr)
    # The simulator copy held the placeholder token only, and the run's files stayed in --out.
    sim_seed = yaml.safe_load((tmp_path / "rehearsal" / "pvesim-seed.yaml").read_text())
    assert [t["userid"] for t in sim_seed["tokens"]] == ["proxshift@pve"]
    assert TOKEN_SECRET not in json.dumps(sim_seed)
    assert (tmp_path / "rehearsal" / "clusters" / "demo" / "agent-config.yaml").is_file()


def test_rehearse_reads_real_proxmox_with_gets_only(tmp_path):
    (tmp_path / "real").mkdir()
    seed = troubled_seed(tmp_path / "troubled-seed.yaml")
    with running_pvesim(tmp_path / "real", seed=seed) as real:
        # The demo inventory pointed at the "real" Proxmox (the recording simulator), with its token.
        inventory = tmp_path / "inventory"
        shutil.copytree(DEMO_INVENTORY, inventory)
        site = inventory / "group_vars" / "all" / "site.yml"
        site.write_text(site.read_text() + f"proxmox_api_port: {real.port}\nproxmox_ca_path: {real.ca_path}\n")
        before = real.state()
        seq = real.last_seq()
        rc, report, stderr = rehearse(tmp_path, inventory, env={"PROXMOX_TOKEN_SECRET": TOKEN_SECRET})
        assert rc == 1, stderr
        assert report["layout_source"] == f"proxmox (https://127.0.0.1:{real.port})", report
        assert_reports_overcommit_and_mac_conflict(report, stderr)
        seen = real.requests(seq)
        assert seen, "the rehearsal did not read the real Proxmox"
        assert {r["method"] for r in seen} == {"GET"}, [f"{r['method']} {r['path']}" for r in seen if r["method"] != "GET"]
        assert {"/version", "/nodes", "/cluster/resources", "/nodes/pve3/qemu/200/config"} <= {r["path"] for r in seen}
        assert real.state()["vms"] == before["vms"]


def test_rehearse_without_any_layout_says_what_to_give(tmp_path):
    rc, report, _ = rehearse(tmp_path, DEMO_INVENTORY, "--from", "inventory")
    assert rc == 3
    assert "no layout to rehearse on" in report["error"]["message"]


def test_rehearse_can_read_the_real_vault(tmp_path):
    """--secrets vault: the secrets phase reads the site's Vault (read-only) instead of placeholders."""
    import base64

    from services import running_openbao

    canary = json.dumps({"auths": {"registry.example.com": {"auth": "Y2FuYXJ5OnJlaGVhcnNhbC00NDE="}}})
    ssh = "ssh-ed25519 " + base64.b64encode(b"\0\0\0\x0bssh-ed25519\0\0\0\x20" + bytes(range(64, 96))).decode() + " r@test"
    (tmp_path / "bao").mkdir()
    with running_openbao(tmp_path / "bao") as bao:
        bao.kv_put("openshift/pull-secret", {"pullSecret": canary})
        bao.kv_put("openshift/ssh", {"publicKey": ssh})
        rc, report, stderr = rehearse(
            tmp_path, DEMO_INVENTORY, "--seed", str(DEMO_SEED), "--secrets", "vault", "--", "-e", f"vault_url={bao.addr}",
            env={"VAULT_TOKEN": bao.token},
        )
    assert rc == 0, stderr
    assert report["status"] == "ok" and report["problems"] == [], report
    assert "secrets : Read the secrets from Vault" in stderr
    assert canary not in stderr and bao.token not in stderr
    agent_config = (tmp_path / "rehearsal" / "clusters" / "demo" / "agent-config.yaml").read_text()
    assert "demo-master-0" in agent_config
    install_config = (tmp_path / "rehearsal" / "clusters" / "demo" / "install-config.yaml")
    assert ssh.split()[1] in install_config.read_text()
