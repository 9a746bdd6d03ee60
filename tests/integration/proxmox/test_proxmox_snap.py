"""proxshift.proxmox.proxmox_snap through real ansible-playbook against pvesim (the collection's binary, its action
plugin and the `group/proxshift.proxmox.proxmox` defaults): a cluster's VMs snapshotted in check mode (no write),
for real with a diff, again (no change), rolled back, and a bad name refused before any request."""
from __future__ import annotations

import pytest
import yaml

from services import LAB_SEED, running_pvesim

CLUSTER = {"tags": ["proxshift-c1"], "owner_tag": "proxshift-c1"}


@pytest.fixture
def sim(tmp_path):
    seed = yaml.safe_load(LAB_SEED.read_text())
    for vmid in (201, 202):
        seed["vms"].append({"vmid": vmid, "node": "pve1", "config": {
            "name": f"c1-m{vmid}", "memory": "4096", "scsi0": f"local-lvm:vm-{vmid}-disk-0,size=8G",
            "tags": "proxshift-c1"}})
    seed["vms"].append({"vmid": 209, "node": "pve1", "config": {
        "name": "c1-stray", "memory": "1024", "scsi0": "local-lvm:vm-209-disk-0,size=8G", "tags": "c1"}})
    path = tmp_path / "seed.yaml"
    path.write_text(yaml.safe_dump(seed))
    with running_pvesim(tmp_path, path) as s:
        yield s


def snapshots(sim, vmid: int) -> list[str]:
    vm = next(v for v in sim.state()["vms"] if v["vmid"] == vmid)
    return sorted(vm.get("snapshots") or {})


def task(name: str, **args) -> str:
    return yaml.safe_dump([{"name": name, "proxshift.proxmox.proxmox_snap": args, "register": "r",
                            "ignore_errors": True}], sort_keys=False)


def test_a_cluster_restore_point_is_predicted_taken_kept_and_rolled_back(run_playbook, sim):
    seq = sim.last_seq()
    check = run_playbook(sim.play(task("predict", **CLUSTER, snapname="restore-1")), check=True, diff=True)
    assert check.rc == 0, check.output
    r = check.task("predict")
    assert r["changed"] is True and r["have"] == [201, 202], r
    assert sim.writes_since(seq) == []

    take = run_playbook(sim.play(task("take", **CLUSTER, snapname="restore-1", retention=2)), diff=True)
    assert take.rc == 0, take.output
    r = take.task("take")
    assert r["changed"] is True, r
    assert [v["action"] for v in r["vms"]] == ["created", "created"]
    assert snapshots(sim, 201) == snapshots(sim, 202) == ["restore-1"]
    assert snapshots(sim, 209) == [], "not owned: left alone"

    again = run_playbook(sim.play(task("again", **CLUSTER, snapname="restore-1")))
    assert again.task("again")["changed"] is False, again.output

    back = run_playbook(sim.play(task("back", **CLUSTER, snapname="restore-1", state="rollback")))
    r = back.task("back")
    assert r["changed"] is True and r["msg"] == "2 VMs rolled back to 'restore-1'", r


def test_a_bad_snapshot_name_fails_before_any_request(run_playbook, sim):
    seq = sim.last_seq()
    run = run_playbook(sim.play(task("bad", vmid=201, owner_tag="proxshift-c1", snapname="before upgrade")))
    r = run.task("bad")
    assert run.status("bad") == "failed", run.output
    assert r["msg"].startswith("snapname 'before upgrade' is not a valid Proxmox snapshot name"), r
    assert sim.requests(seq) == []
