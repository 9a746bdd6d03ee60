"""playbooks/remediate.yaml end to end (MachineHealthCheck semantics): pvesim for the VMs, OpenBao for the
record, the real kube-apiserver and kube-controller-manager playing the installed prod-ha cluster. The decisions
themselves are unit-tested in cluster_nodes' remediation.rs.

SICK is a worker whose kubelet died (`stop_kubelet`: its Lease is no longer renewed), with a Running pod on it
(grace period 30 s): the REAL node-lifecycle controller marks it `Ready=Unknown` and taints it unreachable, and
nothing confirms its pods' deletion (the kubelet stand-in `PodTermination` leaves them `Terminating`). FLAKY went
NotReady a moment before each run; JOINING's kubelet has not registered its Node yet (its VM started moments ago).

One run each: check mode (the plan, no write) under max_unhealthy 0 (SICK alone counts: FLAKY is within the
timeout, JOINING within node_startup_timeout; nothing is remediated), SICK left alone while a scale.yaml run works
on it, a reset of SICK; a reset of an earlier episode (before SICK's current Ready transition) that does not
count: a fresh failure is reset again, not replaced; then — still unhealthy node_startup_timeout after a reset of
this episode — its replacement: drained without waiting for the dead kubelet (its pod left Terminating), its Node
deleted, only its owned VM deleted, a new VM with the same MAC from the node ISO, whose join fails (the record
keeps SICK in `replacing`, not in `removed_nodes`: remediate.yaml resumes it once no scale.yaml run works on it,
and so does a plain scale.yaml run); the resumed replacement joins through the kubelet-join stand-in (client CSR,
approved by the role; Node NotReady; serving CSR, approved; Ready). The run ends with SICK Ready, and a rerun finds
nothing to do."""
from __future__ import annotations

import json
import shlex
import sys
import time
from datetime import datetime, timezone

import pytest
import yaml

from standins.cvo import cluster_at
from standins.kubelet import PodTermination, allow_csr_creation
from kube_fixtures import KubeApi, condition, kube_api, wait_until  # noqa: F401 (fixture)
from testlib import REPO

CLUSTER = "prod-ha"
MASTERS = [f"{CLUSTER}-master-{i}" for i in range(3)]
WORKERS = [f"{CLUSTER}-worker-{i}" for i in range(3)]
SICK, FLAKY, JOINING = WORKERS[1], WORKERS[2], WORKERS[0]
DAY = 86400
# FLAKY (NotReady a moment before each run) stays within it; SICK is judged once Ready=Unknown that long.
UNHEALTHY = 60
# JOINING stays within node_startup_timeout for the whole test, however slow the machine.
TIMEOUT = {"remediate_unhealthy_timeout": UNHEALTHY, "remediate_node_startup_timeout": 3600}


@pytest.fixture
def openshift_4_19(kube_api: KubeApi):
    """The ClusterVersion `oc adm node-image` (the replacement's join) reads."""
    with cluster_at(kube_api, "4.19.7"):
        yield


def ready_of(kube_api: KubeApi, node: str) -> dict:
    obj = kube_api.get(f"/api/v1/nodes/{node}") or {}
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == "Ready"), {})


def flaky_just_now(kube_api: KubeApi):
    """FLAKY went NotReady a moment ago: within the unhealthy timeout, not remediated, not counted."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    kube_api.patch_status(f"/api/v1/nodes/{FLAKY}", {"conditions": [{**condition("Ready", "Unknown"), "lastTransitionTime": now}]})


def running_pod_on(kube_api: KubeApi, node: str) -> str:
    """A Running pod on `node`, with the default grace period (30 s); returns namespace/name."""
    ns = "shop"
    kube_api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    wait_until(lambda: kube_api.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default"), 60,
               lambda: "the service-account controller made no `default` account in 60 s")
    kube_api.ok("POST", f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"},
        "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "c", "image": "registry.example/app"}]}})
    kube_api.patch_status(f"/api/v1/namespaces/{ns}/pods/web-0", {"phase": "Running", "conditions": [condition("Ready", "True")]})
    return f"{ns}/web-0"


def test_a_dead_worker_is_reset_then_replaced_end_to_end(run_flow, site, kube_api: KubeApi, tmp_path, openshift_4_19):
    site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {
        "phase": "installed", "kubeconfig": kube_api.kubeconfig(kube_api.kubeconfig_token),
        "agent_config": yaml.safe_dump({"hosts": [{"hostname": n, "role": "master" if n in MASTERS else "worker"}
                                                  for n in MASTERS + WORKERS]})})
    allow_csr_creation(kube_api)
    for n in MASTERS + [SICK, FLAKY]:
        role = "master" if n in MASTERS else "worker"
        kube_api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                              "metadata": {"name": n, "labels": {f"node-role.kubernetes.io/{role}": ""}}})
        kube_api.patch_status(f"/api/v1/nodes/{n}", {"conditions": [condition("Ready", "True")]})
    pod = running_pod_on(kube_api, SICK)
    kube_api.stop_kubelet(SICK)
    try:
        assert run_flow("scale.yaml", CLUSTER).rc == 0  # the VMs (no new host: nothing to join)
        assert run_flow("start.yaml", CLUSTER).rc == 0
        sick_vmid = site.sim.vm_by_name(SICK)[0]

        # The real node-lifecycle controller has judged SICK; remediation judges it UNHEALTHY s later.
        def unknown_long_enough() -> bool:
            ready = ready_of(kube_api, SICK)
            taints = [t["key"] for t in (kube_api.get(f"/api/v1/nodes/{SICK}")["spec"].get("taints") or [])]
            since = datetime.strptime(ready.get("lastTransitionTime", "2100-01-01T00:00:00Z"), "%Y-%m-%dT%H:%M:%SZ")
            return (ready.get("status") == "Unknown" and "node.kubernetes.io/unreachable" in taints
                    and time.time() - since.replace(tzinfo=timezone.utc).timestamp() > UNHEALTHY + 1)
        wait_until(unknown_long_enough, UNHEALTHY + 120, lambda: f"{SICK} not Unknown for {UNHEALTHY} s: {ready_of(kube_api, SICK)}",
                   interval=1)

        # max_unhealthy 0: SICK alone counts (FLAKY within the timeout, JOINING within node_startup_timeout), one
        # more than allowed: nothing is remediated. Check mode writes nothing.
        flaky_just_now(kube_api)
        seq, version = site.sim.last_seq(), site.record_version(CLUSTER)
        check = run_flow("remediate.yaml", CLUSTER, check=True, extra={**TIMEOUT, "remediate_max_unhealthy": 0})
        assert check.rc == 0, check.output
        plan = check.task("Decide what to remediate")
        assert [(u["name"], u["reason"].split(" for ")[0]) for u in plan["unhealthy"]] == [(SICK, "Ready=Unknown")], plan
        assert plan["pending"] == [FLAKY] and plan["starting"] == [JOINING], plan
        assert "1 of 6 nodes are unhealthy, more than max_unhealthy 0" in plan["short_circuit"], plan
        assert plan["reset"] == [] == plan["replace"], plan
        assert site.sim.writes_since(seq) == [] and site.record_version(CLUSTER) == version, "check mode writes nothing"

        # A scale.yaml run working on SICK (its record's `scaling`): SICK is not judged while it runs.
        record = site.record(CLUSTER)
        site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {**record, "scaling": {"nodes": [SICK], "since": int(time.time())}})
        flaky_just_now(kube_api)
        scaling = run_flow("remediate.yaml", CLUSTER, check=True, extra=TIMEOUT)
        assert scaling.rc == 0, scaling.output
        plan = scaling.task("Decide what to remediate")
        assert plan["reset"] == [] and SICK not in [u["name"] for u in plan["unhealthy"]], plan
        site.bao.kv_put(f"openshift/clusters/{CLUSTER}", record)

        # Under the default max_unhealthy (40 % of 6: 2): SICK's VM is reset first.
        flaky_just_now(kube_api)
        seq = site.sim.last_seq()
        reset = run_flow("remediate.yaml", CLUSTER, extra=TIMEOUT)
        assert reset.rc == 0, reset.output
        plan = reset.task("Decide what to remediate")
        assert plan["reset"] == [SICK] and plan["replace"] == [] and not plan.get("short_circuit"), plan
        assert site.sim.writes_since(seq) == [f"POST /nodes/{site.sim.vm_by_name(SICK)[1]}/qemu/{sick_vmid}/status/reset"]
        assert SICK in site.record(CLUSTER)["remediation_resets"]

        # A reset two days ago, before SICK's current Ready transition, is of an earlier failure it recovered from:
        # the fresh failure is reset again, not replaced (check mode).
        record = site.record(CLUSTER)
        site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {**record, "remediation_resets": {SICK: int(time.time()) - 2 * DAY}})
        flaky_just_now(kube_api)
        stale = run_flow("remediate.yaml", CLUSTER, check=True, extra=TIMEOUT)
        assert stale.rc == 0, stale.output
        plan = stale.task("Decide what to remediate")
        assert plan["reset"] == [SICK] and plan["replace"] == [], plan

        # Its kubelet stays dead: Ready=Unknown for three days, reset two days ago (this episode, long past
        # node_startup_timeout), SICK is replaced. The first join fails (no kubelet comes: the monitor fails).
        three_days = datetime.fromtimestamp(time.time() - 3 * DAY, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        kube_api.patch_status(f"/api/v1/nodes/{SICK}",
                              {"conditions": [{**condition("Ready", "Unknown"), "lastTransitionTime": three_days}]})
        site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {**record, "remediation_resets": {SICK: int(time.time()) - 2 * DAY}})
        flaky_just_now(kube_api)
        seq = site.sim.last_seq()
        with PodTermination(kube_api, [SICK]):
            failed = run_flow("remediate.yaml", CLUSTER, with_installer=True,
                              env_more={"PROXSHIFT_TEST_NODE_IMAGE_FAIL": "monitor"},
                              extra={**TIMEOUT, "scale_poll_interval": 1, "scale_skip_wait_for_delete_timeout": 1,
                                     "scale_join_timeout": 5})
        assert failed.rc != 0, failed.output
        plan = failed.task("Decide what to remediate")
        assert plan["replace"] == [SICK] and plan["reset"] == [] and not plan.get("short_circuit"), plan
        # Drained without waiting for the dead kubelet: the evicted pod was left Terminating, the Node deleted.
        [drained] = failed.task("Drain and delete the Nodes")["nodes"]
        assert drained["evict"] == [pod] and drained["left_terminating"] == [pod] and drained["deleted"] is True, drained
        writes = site.sim.writes_since(seq)
        deletes = [i for i, w in enumerate(writes) if w.startswith("DELETE")]
        assert deletes and all(f"/qemu/{sick_vmid}" in writes[i] for i in deletes), writes
        creates = [i for i, w in enumerate(writes) if w.startswith("POST") and w.endswith("/qemu")]
        assert creates and creates[-1] > deletes[-1], f"a new VM is created after the old one is deleted: {writes}"
        # Not removed for good: the replacement is still to be done.
        record = site.record(CLUSTER)
        assert record.get("replacing") == [SICK] and SICK not in record.get("removed_nodes", []), record

        # Once no scale.yaml run works on it (its `scaling` older than scale_join_timeout), remediate.yaml resumes
        # the replacement (check mode: the plan).
        site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {**record, "scaling": {"nodes": [SICK], "since": int(time.time()) - 2 * DAY}})
        flaky_just_now(kube_api)
        resume = run_flow("remediate.yaml", CLUSTER, check=True, with_installer=True, extra=TIMEOUT)
        assert resume.rc == 0, resume.output
        assert SICK not in [u["name"] for u in resume.task("Decide what to remediate")["unhealthy"]]
        assert f"Resuming the replacement of {SICK}" in resume.task("Show the replacements resumed")["msg"]

        # A plain scale.yaml run resumes it too: its failed VM deleted, a fresh one joins. The new VM's kubelet is
        # the kubelet-join stand-in, started by the oc double's monitor hook.
        failed_vmid = site.sim.vm_by_name(SICK)[0]
        info = tmp_path / "api.json"
        info.write_text(json.dumps(kube_api.info))
        hook = f"{shlex.quote(sys.executable)} {REPO}/tests/standins/kubelet_join.py {info} {SICK} \"$1\""
        seq = site.sim.last_seq()
        replaced = run_flow("scale.yaml", CLUSTER, with_installer=True, env_more={"PROXSHIFT_TEST_ON_MONITOR": hook},
                            extra={"scale_poll_interval": 1, "scale_join_timeout": 300})
        assert replaced.rc == 0, replaced.output
        writes = site.sim.writes_since(seq)
        deletes = [i for i, w in enumerate(writes) if w.startswith("DELETE")]
        assert deletes and all(f"/qemu/{failed_vmid}" in writes[i] for i in deletes), writes
        vmid, _, config = site.sim.vm_by_name(SICK)
        assert "BC:24:11:40:00:22" in config["net0"].upper(), config
        assert any(f"{CLUSTER}-node-" in v for v in config.values()), config
        assert len(site.owned_vms(CLUSTER)) == 6
        ready = replaced.task("Approve exactly the new nodes' CSRs and wait for them to be Ready")
        assert sorted((a["node"], a["kind"]) for a in ready["approved"]) == [(SICK, "client"), (SICK, "serving")], ready
        # The new machine's Node (another uid), Ready, its kubelet alive: no unreachable taint.
        node = kube_api.get(f"/api/v1/nodes/{SICK}")
        assert ready_of(kube_api, SICK)["status"] == "True", node
        assert "node.kubernetes.io/unreachable" not in [t["key"] for t in node["spec"].get("taints") or []], node
        record = site.record(CLUSTER)
        assert SICK in record["added_nodes"] and SICK not in record.get("removed_nodes", [])
        assert SICK not in record.get("replacing", [])
        assert SICK not in record.get("remediation_resets", {})

        # The replaced node is Ready: the rerun finds nothing to do and touches nothing.
        flaky_just_now(kube_api)
        seq, version = site.sim.last_seq(), site.record_version(CLUSTER)
        rerun = run_flow("remediate.yaml", CLUSTER, extra=TIMEOUT)
        assert rerun.rc == 0, rerun.output
        plan = rerun.task("Decide what to remediate")
        assert plan["reset"] == [] == plan["replace"] and plan["unhealthy"] == [], plan
        assert site.sim.writes_since(seq) == [] and site.record_version(CLUSTER) == version, "the rerun changes nothing"
    finally:
        for n in MASTERS + WORKERS:
            kube_api.request("DELETE", f"/api/v1/nodes/{n}")
        kube_api.request("DELETE", "/api/v1/namespaces/shop")
        kube_api.start_kubelet(SICK)
