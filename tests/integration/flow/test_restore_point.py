"""restore_point.yaml and restore.yaml end to end (#46): pvesim for the VMs, OpenBao for the record. lab-sno is
recorded installed without a kubeconfig, so stop.yaml and start.yaml only power its VM (the OpenShift steps are
test_stop_start.py's). A restore point stops the VM, snapshots it, records the restore point (name, time, version,
VMIDs) and starts the VM again; the VM's config is then changed and the record's version moved on ("an upgrade");
restore.yaml stops the VM, rolls it back to the newest restore point, notes it and takes the restore point's
version back, and starts the VM. A second restore point with restore_point_keep=1 removes the first. A VM whose disk
cannot be snapshotted stops the run before the cluster is stopped."""
from __future__ import annotations

import time

import pytest

CLUSTER = "lab-sno"
VMID = 4100


def make_vm(site):
    """lab-sno's VM as the vms phase leaves it: owned (tagged proxshift-lab-sno), running."""
    site.sim.root_password = "demo-root-password"  # the demo seed's root@pam
    site.sim.root_api("POST", "/nodes/pve1/qemu", {
        "vmid": str(VMID), "name": f"{CLUSTER}-0", "memory": "16384", "scsi0": "local-lvm:32",
        "tags": f"proxshift-{CLUSTER}"})
    for _ in range(400):  # bounded by polls
        vm = site.sim.vm(VMID)
        if vm and "lock" not in vm:
            break
        time.sleep(0.05)
    site.sim.root_api("POST", f"/nodes/pve1/qemu/{VMID}/status/start")


def snapshots(site) -> list[str]:
    vm = next(v for v in site.sim.state()["vms"] if v["vmid"] == VMID)
    return sorted(vm.get("snapshots") or {})


def running(site) -> bool:
    return next(v for v in site.sim.state()["vms"] if v["vmid"] == VMID)["running"]


def test_a_restore_point_is_taken_recorded_and_rolled_back_to(run_flow, site):
    site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {"phase": "installed", "version": "4.19.7"})
    make_vm(site)
    for _ in range(400):
        if running(site):
            break
        time.sleep(0.05)

    check = run_flow("restore_point.yaml", CLUSTER, check=True)
    assert check.rc == 0, check.output
    assert snapshots(site) == [] and running(site)

    taken = run_flow("restore_point.yaml", CLUSTER, extra={"restore_point_name": "restore-1"})
    assert taken.rc == 0, taken.output
    assert snapshots(site) == ["restore-1"]
    assert running(site), "started again"
    points = site.record(CLUSTER)["restore_points"]
    assert [(p["name"], p["version"], p["vmids"]) for p in points] == [("restore-1", "4.19.7", [VMID])], points

    # Life goes on: the VM changes, the cluster is "upgraded".
    site.sim.root_api("PUT", f"/nodes/pve1/qemu/{VMID}/config", {"memory": "32768"})
    site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {**site.record(CLUSTER), "version": "4.20.1"})

    restored = run_flow("restore.yaml", CLUSTER)
    assert restored.rc == 0, restored.output
    assert site.sim.vm(VMID)["memory"] == "16384", "the restore point's config"
    record = site.record(CLUSTER)
    assert record["restored"]["name"] == "restore-1" and record["version"] == "4.19.7", record
    assert running(site)

    again = run_flow("restore_point.yaml", CLUSTER, extra={"restore_point_name": "restore-2", "restore_point_keep": 1})
    assert again.rc == 0, again.output
    assert snapshots(site) == ["restore-2"], "retention removed restore-1"
    assert [p["name"] for p in site.record(CLUSTER)["restore_points"]] == ["restore-2"]


def test_restore_without_a_restore_point_is_refused_before_any_rollback(run_flow, site):
    site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {"phase": "installed"})
    make_vm(site)
    run = run_flow("restore.yaml", CLUSTER)
    assert run.rc != 0
    assert "has no restore point in its record" in run.output
    assert not any("/rollback" in w for w in site.sim.writes_since(0))


def test_a_failed_snapshot_still_restarts_the_cluster_and_records_nothing(run_flow, site):
    site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {"phase": "installed", "version": "4.19.7"})
    make_vm(site)
    site.sim.fault({"fail_tasks": {"type": "qmsnapshot", "count": 1, "message": "injected: snapshot failed"}})
    run = run_flow("restore_point.yaml", CLUSTER, extra={"restore_point_name": "restore-1"})
    assert run.rc != 0
    assert run.status("Fail when the snapshots failed") == "failed", run.output
    assert "injected: snapshot failed" in run.task("Fail when the snapshots failed")["msg"]
    assert running(site), "started again although the restore point failed"
    assert "restore_points" not in site.record(CLUSTER)


NFS = {"id": "nfs-raw", "type": "nfs", "content": ["images"], "size": "1T", "shared": True}


@pytest.mark.parametrize("site", [{"storages": {"pve1": [NFS], "pve2": [NFS], "pve3": [NFS]}}], indirect=True,
                         ids=["nfs"])
def test_a_vm_that_cannot_be_snapshotted_stops_the_run_before_the_cluster_stops(run_flow, site):
    site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {"phase": "installed", "version": "4.19.7"})
    make_vm(site)
    # A second disk, a raw file on the NFS storage: Proxmox cannot snapshot it.
    site.sim.root_api("PUT", f"/nodes/pve1/qemu/{VMID}/config", {"scsi1": "nfs-raw:1,format=raw"})
    for _ in range(400):
        if running(site) and "lock" not in site.sim.vm(VMID):
            break
        time.sleep(0.05)
    writes = len(site.sim.writes_since(0))
    run = run_flow("restore_point.yaml", CLUSTER, extra={"restore_point_name": "restore-1"})
    assert run.rc != 0
    assert run.status("Ask Proxmox whether each VM's disks can be snapshotted") == "failed", run.output
    msg = run.task("Ask Proxmox whether each VM's disks can be snapshotted")["msg"]
    assert f"{CLUSTER}-0 ({VMID}) cannot be snapshotted" in msg, msg
    assert running(site) and snapshots(site) == []
    assert site.sim.writes_since(0)[writes:] == [], "nothing was stopped, snapshotted or written"
    assert "restore_points" not in site.record(CLUSTER)
