"""playbooks/remediate.yaml end to end (MachineHealthCheck semantics): pvesim for the VMs, OpenBao for the
record, the real kube-apiserver playing the installed prod-ha cluster. The test plays the kubelets (Node
Ready conditions, and during the replacement the rejoining node's CSRs and Node through the oc double's
PROXSHIFT_TEST_ON_MONITOR hook). The decisions themselves are unit-tested in cluster_nodes' remediation.rs.

One run each: check mode (the plan, no write), a reset of the node NotReady past the timeout (the node
NotReady for a moment and the host whose Node is not registered yet, still within node_startup_timeout of
its VM's start, are left alone), then — still unhealthy long after its reset — its replacement: the
Node drained and deleted, only its owned VM deleted, a new VM with the same MAC from the node ISO, exactly
its CSRs approved."""
from __future__ import annotations

import json
import shlex
import sys
import time
from datetime import datetime, timezone

import pytest
import yaml

from standins.cvo import cluster_at
from standins.kubelet import allow_csr_creation
from kube_fixtures import KubeApi, condition, kube_api  # noqa: F401 (fixture)
from testlib import REPO

CLUSTER = "prod-ha"
MASTERS = [f"{CLUSTER}-master-{i}" for i in range(3)]
WORKERS = [f"{CLUSTER}-worker-{i}" for i in range(3)]
SICK, FLAKY, JOINING = WORKERS[1], WORKERS[2], WORKERS[0]
DAY = 86400
# A day: FLAKY (NotReady since the test began) stays within it, SICK (NotReady since 2026-01-01) is past it.
TIMEOUT = {"remediate_unhealthy_timeout": DAY}


@pytest.fixture
def openshift_4_19(kube_api: KubeApi):
    """The ClusterVersion `oc adm node-image` (the replacement's join) reads."""
    with cluster_at(kube_api, "4.19.7"):
        yield


def test_reset_then_replace_an_unhealthy_worker(run_flow, site, kube_api: KubeApi, tmp_path, openshift_4_19):
    site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {
        "phase": "installed", "kubeconfig": kube_api.kubeconfig(kube_api.kubeconfig_token),
        "agent_config": yaml.safe_dump({"hosts": [{"hostname": n, "role": "master" if n in MASTERS else "worker"}
                                                  for n in MASTERS + WORKERS]})})
    allow_csr_creation(kube_api)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    # JOINING's kubelet has not registered its Node yet (its VM started moments ago): it is judged only
    # node_startup_timeout after its VM's start, neither reset nor counted.
    for n in MASTERS + [SICK, FLAKY]:
        role = "master" if n in MASTERS else "worker"
        kube_api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                              "metadata": {"name": n, "labels": {f"node-role.kubernetes.io/{role}": ""}}})
        ready = {SICK: condition("Ready", "False"),  # since 2026-01-01: long past the timeout
                 FLAKY: {**condition("Ready", "Unknown"), "lastTransitionTime": now}}.get(n, condition("Ready", "True"))
        kube_api.patch_status(f"/api/v1/nodes/{n}", {"conditions": [ready]})
    try:
        assert run_flow("scale.yaml", CLUSTER).rc == 0  # the VMs (no new host: nothing to join)
        assert run_flow("start.yaml", CLUSTER).rc == 0
        sick_vmid = site.sim.vm_by_name(SICK)[0]

        seq, version = site.sim.last_seq(), site.record_version(CLUSTER)
        check = run_flow("remediate.yaml", CLUSTER, check=True, extra=TIMEOUT)
        assert check.rc == 0, check.output
        plan = check.task("Decide what to remediate")
        assert plan["reset"] == [SICK] and plan["replace"] == [] and plan["pending"] == [FLAKY], plan
        assert plan["starting"] == [JOINING], plan
        assert site.sim.writes_since(seq) == [] and site.record_version(CLUSTER) == version, "check mode writes nothing"

        # A scale.yaml run working on SICK (its record's `scaling`): SICK is not judged while it runs.
        record = site.record(CLUSTER)
        site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {**record, "scaling": {"nodes": [SICK], "since": int(time.time())}})
        scaling = run_flow("remediate.yaml", CLUSTER, check=True, extra=TIMEOUT)
        assert scaling.rc == 0, scaling.output
        plan = scaling.task("Decide what to remediate")
        assert plan["reset"] == [] and SICK not in [u["name"] for u in plan["unhealthy"]], plan
        site.bao.kv_put(f"openshift/clusters/{CLUSTER}", record)

        seq = site.sim.last_seq()
        reset = run_flow("remediate.yaml", CLUSTER, extra=TIMEOUT)
        assert reset.rc == 0, reset.output
        assert site.sim.writes_since(seq) == [f"POST /nodes/{site.sim.vm_by_name(SICK)[1]}/qemu/{sick_vmid}/status/reset"]
        assert SICK in site.record(CLUSTER)["remediation_resets"]

        # Still unhealthy long after the reset: replaced. The rejoining kubelet is played by the oc double's hook.
        record = site.record(CLUSTER)
        record["remediation_resets"] = {SICK: int(time.time()) - 2 * DAY}
        site.bao.kv_put(f"openshift/clusters/{CLUSTER}", record)
        info = tmp_path / "api.json"
        info.write_text(json.dumps(kube_api.info))
        hook = f"{shlex.quote(sys.executable)} {REPO}/tests/standins/kubelet_join.py {info} {SICK} \"$1\""
        seq = site.sim.last_seq()
        replaced = run_flow("remediate.yaml", CLUSTER, with_installer=True, env_more={"PROXSHIFT_TEST_ON_MONITOR": hook},
                            extra={**TIMEOUT, "scale_poll_interval": 1})
        assert replaced.rc == 0, replaced.output
        writes = site.sim.writes_since(seq)
        deletes = [i for i, w in enumerate(writes) if w.startswith("DELETE")]
        assert deletes and all(f"/qemu/{sick_vmid}" in writes[i] for i in deletes), writes
        creates = [i for i, w in enumerate(writes) if w.startswith("POST") and w.endswith("/qemu")]
        assert creates and creates[-1] > deletes[-1], f"a new VM is created after the old one is deleted: {writes}"
        vmid, _, config = site.sim.vm_by_name(SICK)
        assert "BC:24:11:40:00:22" in config["net0"].upper(), config
        assert any(f"{CLUSTER}-node-" in v for v in config.values()), config
        assert len(site.owned_vms(CLUSTER)) == 6
        ready = replaced.task("Approve exactly the new nodes' CSRs and wait for them to be Ready")
        assert {a["node"] for a in ready["approved"]} == {SICK} and len(ready["approved"]) == 2, ready
        record = site.record(CLUSTER)
        assert SICK in record["added_nodes"] and SICK not in record.get("removed_nodes", [])
        assert SICK not in record.get("remediation_resets", {})

        # The replaced node is Ready now: the rerun finds nothing to do and touches nothing.
        kube_api.patch_status(f"/api/v1/nodes/{SICK}", {"conditions": [condition("Ready", "True")]})
        seq, version = site.sim.last_seq(), site.record_version(CLUSTER)
        rerun = run_flow("remediate.yaml", CLUSTER, extra=TIMEOUT)
        assert rerun.rc == 0, rerun.output
        assert rerun.task("Decide what to remediate")["reset"] == [] == rerun.task("Decide what to remediate")["replace"]
        assert site.sim.writes_since(seq) == [] and site.record_version(CLUSTER) == version, "the rerun changes nothing"
    finally:
        for n in MASTERS + WORKERS:
            kube_api.request("DELETE", f"/api/v1/nodes/{n}")
