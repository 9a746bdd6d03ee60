"""pvesim against a Proxmox client it was not written with: community.proxmox's modules over proxmoxer
(PyPI's `ansible` package, unmodified, from scripts/deps/community-proxmox.sh). A simulator that only our
own client can talk to would prove little; this one must serve the API the way PVE does for them too —
token auth, form encoding, task UPIDs and their status, config and status endpoints, errors."""
from __future__ import annotations

import json

import pytest

from services import ROOT_TOKEN_SECRET, community_proxmox_venv, running_pvesim

VMID = 7100


def play(sim) -> str:
    conn = {"api_host": sim.host, "api_port": sim.port, "api_user": "root@pam", "api_token_id": "pvesim",
            "api_token_secret": ROOT_TOKEN_SECRET, "validate_certs": True}
    vm = {"vmid": VMID, "node": "pve1"}
    tasks = [
        {"name": "Create", "community.proxmox.proxmox_kvm": {
            **vm, "name": "third-party", "memory": 2048, "cores": 2, "cpu": "host", "scsihw": "virtio-scsi-single",
            "scsi": {"scsi0": "local-lvm:8"}, "net": {"net0": "virtio,bridge=vmbr0"}, "tags": ["conformance"],
            "state": "present"}},
        {"name": "Create again", "community.proxmox.proxmox_kvm": {**vm, "name": "third-party", "state": "present"}},
        {"name": "Current", "community.proxmox.proxmox_kvm": {**vm, "state": "current"}},
        {"name": "Second disk", "community.proxmox.proxmox_disk": {
            "vmid": VMID, "disk": "scsi1", "storage": "local-lvm", "size": 4, "ssd": True, "state": "present"}},
        {"name": "Second NIC", "community.proxmox.proxmox_nic": {
            "vmid": VMID, "interface": "net1", "model": "virtio", "bridge": "vmbr0", "tag": 40, "state": "present"}},
        {"name": "More memory", "community.proxmox.proxmox_kvm": {**vm, "memory": 4096, "update": True}},
        {"name": "Start", "community.proxmox.proxmox_kvm": {**vm, "state": "started"}},
        {"name": "Info", "community.proxmox.proxmox_vm_info": {"vmid": VMID, "config": "current"}},
        {"name": "Stop", "community.proxmox.proxmox_kvm": {**vm, "state": "stopped", "force": True}},
        {"name": "Missing VM", "community.proxmox.proxmox_kvm": {"vmid": 7199, "node": "pve1", "state": "current"},
         "ignore_errors": True},
        {"name": "Remove", "community.proxmox.proxmox_kvm": {**vm, "state": "absent"}},
    ]
    return json.dumps([{"hosts": "localhost", "gather_facts": False,
                        "module_defaults": {"group/community.proxmox.proxmox": conn}, "tasks": tasks}])


@pytest.fixture(params=["8.4.1", "9.2.11"], ids=["pve8", "pve9"])
def pvesim_release(request, tmp_path):
    """pvesim playing a PVE 8 and a PVE 9 release (`--pve-version`)."""
    with running_pvesim(tmp_path, extra=["--pve-version", request.param]) as sim:
        sim.release = request.param
        yield sim


def test_community_proxmox_modules_drive_pvesim(pvesim_release, run_playbook):
    pvesim = pvesim_release
    assert pvesim.api("GET", "version")["version"] == pvesim.release
    venv = community_proxmox_venv()
    # The modules run under the venv's Python (proxmoxer lives there); the controller is the project's.
    inventory = (f"all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                 f"      ansible_python_interpreter: {venv / 'bin' / 'python'}\n")
    site_packages = next((venv / "lib").glob("python3*/site-packages"))
    run = run_playbook(play(pvesim), inventory=inventory,
                       env={"REQUESTS_CA_BUNDLE": str(pvesim.ca_path), "ANSIBLE_COLLECTIONS_PATH": str(site_packages)})
    assert run.rc == 0, run.output

    assert run.task("Create")["changed"] is True
    assert run.task("Create again")["changed"] is False
    assert run.task("Current")["status"] == "stopped"
    assert run.task("Second disk")["changed"] is True
    assert run.task("Second NIC")["changed"] is True
    assert run.task("More memory")["changed"] is True
    assert run.task("Start")["changed"] is True
    info = run.task("Info")["proxmox_vms"]
    assert [v["vmid"] for v in info] == [VMID] and info[0]["status"] == "running", info
    cfg = info[0]["config"]
    assert cfg["memory"] == 4096 or cfg["memory"] == "4096", cfg
    assert cfg["scsi1"].startswith("local-lvm:vm-7100-disk-") and "ssd=1" in cfg["scsi1"], cfg
    assert "bridge=vmbr0" in cfg["net1"] and "tag=40" in cfg["net1"], cfg
    assert run.task("Stop")["changed"] is True
    assert run.status("Missing VM") == "failed"
    assert "7199" in run.task("Missing VM")["msg"]
    assert run.task("Remove")["changed"] is True
    assert pvesim.vm(VMID) is None
    # What the client sent, as the simulator recorded it: only real API paths, each answered.
    paths = {(r["method"], r["path"]) for r in pvesim.requests()}
    assert ("POST", "/nodes/pve1/qemu") in paths and ("DELETE", f"/nodes/pve1/qemu/{VMID}") in paths, paths
