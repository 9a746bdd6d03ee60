"""playbooks/scale.yaml scaling in — by taking a host out of the cluster's inventory group (the cluster's nodes
come from its record), or naming it in remove_nodes — against pvesim, OpenBao and the real kube-apiserver playing
the installed prod-ha cluster (its record, as site.yaml's credentials phase leaves it, written by the test)."""
from __future__ import annotations

import json
import shutil

import yaml

from kube_fixtures import KubeApi, condition, kube_api  # noqa: F401 (fixture)
from testlib import REPO

CLUSTER = "prod-ha"
MASTERS = [f"{CLUSTER}-master-{i}" for i in range(3)]
WORKERS = [f"{CLUSTER}-worker-{i}" for i in range(3)]


def node_writes(api: KubeApi, since: int) -> list[str]:
    return [f"{e['verb']} {e['requestURI']}" for e in api.audit_events()[since:]
            if e["verb"] in ("create", "update", "patch", "delete") and "/nodes" in e["requestURI"]]


def set_vm_config(site, node: str, vmid: int, form: dict):
    """A config change made behind the project's back (the demo seed's token: it has no root token)."""
    status, body = site.sim._call(
        "PUT", f"{site.sim.url}/api2/json/nodes/{node}/qemu/{vmid}/config",
        headers={"Authorization": f"PVEAPIToken=proxshift@pve!ansible={site.token_secret}"}, form=form)
    assert status == 200, body


def inventory_without(tmp_path, name: str):
    """The example inventories with host `name` taken out of the cluster's group."""
    folder = tmp_path / f"inventory-without-{name}"
    shutil.copytree(REPO / "inventory", folder)
    ha = yaml.safe_load((folder / "ha.yml").read_text())
    del ha["all"]["children"]["clusters"]["children"][CLUSTER]["hosts"][name]
    (folder / "ha.yml").write_text(yaml.safe_dump(ha))
    return folder


def test_scale_in_removes_only_the_owned_worker(run_flow, site, kube_api: KubeApi, tmp_path):
    agent_config = {"hosts": [{"hostname": n, "role": "master"} for n in MASTERS]
                    + [{"hostname": n, "role": "worker"} for n in WORKERS]}
    site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {
        "phase": "installed", "kubeconfig": kube_api.kubeconfig(kube_api.kubeconfig_token),
        "agent_config": yaml.safe_dump(agent_config)})
    # Every host is a node already (the record's agent-config): scale.yaml only makes their VMs.
    created = run_flow("scale.yaml", CLUSTER)
    assert created.rc == 0, created.output
    assert len(site.owned_vms(CLUSTER)) == 6
    for n in MASTERS + WORKERS:
        labels = {"node-role.kubernetes.io/master": ""} if n in MASTERS else {"node-role.kubernetes.io/worker": ""}
        kube_api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": labels}})
        kube_api.patch_status(f"/api/v1/nodes/{n}", {"conditions": [condition("Ready", "True")]})
    try:
        # Refused before anything is touched: a master, going below HA's 2 workers, a VM without the tag.
        worker1 = site.sim.vm_by_name(WORKERS[1])
        tags = worker1[2]["tags"]
        set_vm_config(site, worker1[1], worker1[0], {"delete": "tags"})
        # A master is refused naming etcd's quorum (as when it is taken out of the inventory: the same check).
        for names, words in (([MASTERS[0]], "quorum"), (WORKERS[:2], "below its minimum of 2"),
                             ([WORKERS[1]], "ownership tag")):
            seq, audit, version = site.sim.last_seq(), len(kube_api.audit_events()), site.record_version(CLUSTER)
            refused = run_flow("scale.yaml", CLUSTER, extra={"remove_nodes": names})
            assert refused.rc != 0, refused.output
            assert words in refused.output, refused.output
            assert site.sim.writes_since(seq) == [], f"{names}: nothing may be written to Proxmox"
            assert node_writes(kube_api, audit) == [], f"{names}: no Node may be touched"
            assert site.record_version(CLUSTER) == version
        set_vm_config(site, worker1[1], worker1[0], {"tags": tags})

        # A replacement that could not join the host again (no oc) is refused before anything is removed.
        seq, audit, version = site.sim.last_seq(), len(kube_api.audit_events()), site.record_version(CLUSTER)
        no_oc = run_flow("scale.yaml", CLUSTER, with_installer=True,
                         extra={"replace_nodes": [WORKERS[1]], "oc_binary": "/nonexistent/oc"})
        assert no_oc.rc != 0 and "/nonexistent/oc is not an executable file" in no_oc.output, no_oc.output
        assert site.sim.writes_since(seq) == [] and node_writes(kube_api, audit) == []
        assert site.record_version(CLUSTER) == version and kube_api.get(f"/api/v1/nodes/{WORKERS[1]}") is not None

        # WORKERS[2] taken out of the inventory group: --check shows the plan and changes nothing ...
        without = inventory_without(tmp_path, WORKERS[2])
        seq, audit, version = site.sim.last_seq(), len(kube_api.audit_events()), site.record_version(CLUSTER)
        plan = run_flow("scale.yaml", CLUSTER, inventory=without, check=True)
        assert plan.rc == 0, plan.output
        [node] = plan.task("Drain and delete the Nodes")["nodes"]
        assert node["name"] == WORKERS[2] and node["deleted"] is True, node
        assert site.sim.writes_since(seq) == [] and node_writes(kube_api, audit) == []
        assert site.record_version(CLUSTER) == version

        # ... and the run drains and deletes its Node, then its VM.
        vmid, _, _ = site.sim.vm_by_name(WORKERS[2])
        seq, audit = site.sim.last_seq(), len(kube_api.audit_events())
        removed = run_flow("scale.yaml", CLUSTER, inventory=without, extra={"scale_poll_interval": 1})
        assert removed.rc == 0, removed.output
        deletes = [w for w in site.sim.writes_since(seq) if w.startswith("DELETE")]
        assert deletes and all(f"/qemu/{vmid}" in w for w in deletes), deletes
        assert site.sim.vm_by_name(WORKERS[2]) is None
        assert len(site.owned_vms(CLUSTER)) == 5
        assert f"delete /api/v1/nodes/{WORKERS[2]}" in node_writes(kube_api, audit)
        assert kube_api.get(f"/api/v1/nodes/{WORKERS[2]}") is None
        assert site.record(CLUSTER)["removed_nodes"] == [WORKERS[2]]
        assert site.record(CLUSTER)["phase"] == "installed", "the record is merged, not replaced"

        seq = site.sim.last_seq()
        again = run_flow("scale.yaml", CLUSTER, extra={"remove_nodes": json.dumps([WORKERS[2]])})
        assert again.rc == 0, again.output
        assert not [w for w in site.sim.writes_since(seq) if not w.startswith("GET")], "a rerun changes nothing"
        assert again.task("Drain and delete the Nodes")["changed"] is False
    finally:
        for n in MASTERS + WORKERS:
            kube_api.request("DELETE", f"/api/v1/nodes/{n}")
