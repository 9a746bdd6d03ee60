"""stop.yaml and start.yaml end to end, the way OpenShift documents a graceful shutdown and restart
(openshift/openshift-docs `modules/graceful-shutdown.adoc`, `modules/graceful-restart.adoc`): pvesim for the VMs,
OpenBao for the record, the real kube-apiserver and kube-controller-manager playing the installed prod-ha cluster
(3 masters, 3 workers), the stand-ins of `standins/restart.py` playing its kubelets and the kube-apiserver-operator.

The kubelet CA expires in 20 days. A shutdown planned for 30 days is refused before anything is touched; one of 10
days cordons every node, shuts the workers' VMs down before the masters', and notes the shutdown in the record. The
cluster is then started again "45 days later": every kubelet's certificates have expired, so each node stays
NotReady until its new client CSR (from the node-bootstrapper) and then its serving CSR are approved — the masters'
first —, a pending CSR from before the shutdown and one for a machine that is not a node are left alone, the
kube-apiserver operator reports Degraded while a master is not Ready. start.yaml ends with every node Ready and
schedulable, the operators stable and the record's note removed; a rerun changes nothing."""
from __future__ import annotations

import datetime as dt

import pytest
import yaml

from standins.cvo import cluster_at
from standins.kubelet import CSRS, allow_csr_creation, approved, client_csr
from standins.restart import CO, NodeDegradedOperators, PoweredKubelets, kubelet_signer, ready_condition
from kube_fixtures import KubeApi, condition, kube_api, wait_until  # noqa: F401 (fixture)

CLUSTER = "prod-ha"
MASTERS = [f"{CLUSTER}-master-{i}" for i in range(3)]
WORKERS = [f"{CLUSTER}-worker-{i}" for i in range(3)]
IPS = {**{m: [f"10.40.0.1{i + 1}"] for i, m in enumerate(MASTERS)},
       **{w: [f"10.40.0.2{i + 1}"] for i, w in enumerate(WORKERS)}}
FAST = {"start_poll_interval": 1, "start_stable_polls": 2, "start_node_timeout": 300, "start_ready_timeout": 300,
        "start_api_timeout": 60, "stop_shutdown_timeout": 30}


@pytest.fixture
def installed(kube_api: KubeApi, site):
    """prod-ha as installed: its record, its Nodes Ready (last heartbeat long ago), settled operators."""
    site.bao.kv_put(f"openshift/clusters/{CLUSTER}", {
        "phase": "installed", "kubeconfig": kube_api.kubeconfig(kube_api.kubeconfig_token),
        "agent_config": yaml.safe_dump({"hosts": [{"hostname": n, "role": "master" if n in MASTERS else "worker"}
                                                  for n in MASTERS + WORKERS]})})
    allow_csr_creation(kube_api)
    for n in MASTERS + WORKERS:
        role = "master" if n in MASTERS else "worker"
        kube_api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                              "metadata": {"name": n, "labels": {f"node-role.kubernetes.io/{role}": ""}}})
        kube_api.patch_status(f"/api/v1/nodes/{n}", {"conditions": [
            {**condition("Ready", "True"), "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]})
    for op in ("kube-apiserver", "etcd"):
        kube_api.ok("POST", CO, {"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
                                 "metadata": {"name": op}, "spec": {}})
        kube_api.patch_status(f"{CO}/{op}", {"conditions": [
            condition("Available", "True"), condition("Progressing", "False"), condition("Degraded", "False")]})
    kubelet_signer(kube_api, dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=20))
    with cluster_at(kube_api, "4.19.7"):
        yield
    for n in MASTERS + WORKERS:
        kube_api.request("DELETE", f"/api/v1/nodes/{n}")
        kube_api.start_kubelet(n)


def cordoned(kube_api: KubeApi) -> dict[str, bool]:
    return {n: bool(kube_api.get(f"/api/v1/nodes/{n}")["spec"].get("unschedulable")) for n in MASTERS + WORKERS}


def power_actions(site, seq: int, action: str) -> list[str]:
    """The VMs (by name) a power `action` was sent to since `seq`, in order."""
    names = {str(vm["vmid"]): vm["config"]["name"] for vm in site.sim.state()["vms"]}
    return [names[w.split("/qemu/")[1].split("/")[0]] for w in site.sim.writes_since(seq)
            if w.endswith(f"/status/{action}")]


def test_a_cluster_is_shut_down_and_restarted_days_later_the_openshift_way(run_flow, site, kube_api: KubeApi, installed):
    assert run_flow("scale.yaml", CLUSTER).rc == 0  # the VMs (the record's nodes: nothing to join)
    first = run_flow("start.yaml", CLUSTER, extra=FAST)  # no shutdown note: the VMs are started, nothing else
    assert first.rc == 0, first.output
    assert first.status("Approve the control plane's CSRs and wait for it to be Ready") == "skipped"
    assert all(vm["running"] for vm in site.owned_vms(CLUSTER))

    # Check mode: the plan, no write anywhere.
    seq, version, audit = site.sim.last_seq(), site.record_version(CLUSTER), len(kube_api.audit_events())
    check = run_flow("stop.yaml", CLUSTER, check=True, extra={**FAST, "stop_max_days": 10})
    assert check.rc == 0, check.output
    assert check.task("Mark every node unschedulable")["changed"] is True
    assert site.sim.writes_since(seq) == [] and site.record_version(CLUSTER) == version
    assert [e for e in kube_api.audit_events()[audit:]
            if e["verb"] in ("create", "update", "patch", "delete") and "/nodes/" in e["requestURI"]] == []

    # 30 days down would outlive the kubelet CA (20 days left): refused before anything is touched.
    refused = run_flow("stop.yaml", CLUSTER, extra={**FAST, "stop_max_days": 30})
    assert refused.rc != 0
    signer = kube_api.get("/api/v1/namespaces/openshift-kube-apiserver-operator/secrets/kube-apiserver-to-kubelet-signer")
    not_after = signer["metadata"]["annotations"]["auth.openshift.io/certificate-not-after"]
    assert not_after in refused.output and "proxshift_stop_force=true" in refused.output, refused.output[-3000:]
    check_result = refused.task("Check that the kubelet CA outlives the shutdown")
    assert check_result["fits"] is False and check_result["days_left"] in (19, 20), check_result
    assert site.sim.writes_since(seq) == [] and not any(cordoned(kube_api).values())
    assert "shutdown" not in site.record(CLUSTER)

    with PoweredKubelets(kube_api, site.sim, IPS, days_down=45) as kubelets, \
            NodeDegradedOperators(kube_api, MASTERS) as operators:
        seq = site.sim.last_seq()
        stop = run_flow("stop.yaml", CLUSTER, extra={**FAST, "stop_max_days": 10})
        assert stop.rc == 0, stop.output
        assert all(cordoned(kube_api).values())
        assert not any(vm["running"] for vm in site.owned_vms(CLUSTER))
        down = power_actions(site, seq, "shutdown")
        assert sorted(down) == sorted(MASTERS + WORKERS), down
        assert max(down.index(w) for w in WORKERS) < min(down.index(m) for m in MASTERS), f"workers first: {down}"
        note = site.record(CLUSTER)["shutdown"]
        assert sorted(note["cordoned"]) == sorted(MASTERS + WORKERS) and note["restart_by"] == not_after, note

        # Stopped VMs: the rerun changes nothing and does not ask the (dead) API.
        seq, version = site.sim.last_seq(), site.record_version(CLUSTER)
        again = run_flow("stop.yaml", CLUSTER, extra={**FAST, "stop_max_days": 10})
        assert again.rc == 0, again.output
        assert again.changed_tasks() == [] and site.sim.writes_since(seq) == [] and site.record_version(CLUSTER) == version

        # Days later: a CSR left pending from before the restart (stale: made more than the machine-approver's
        # 10 s clock skew before the VMs start), and one for a machine that is no node.
        stale = client_csr(kube_api, MASTERS[0])
        stranger = client_csr(kube_api, "rogue-0")
        made = dt.datetime.strptime(kube_api.get(f"{CSRS}/{stale}")["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
        wait_until(lambda: dt.datetime.utcnow() - made > dt.timedelta(seconds=12), 30, lambda: "the clock stands still")

        seq = site.sim.last_seq()
        start = run_flow("start.yaml", CLUSTER, extra=FAST)
        assert start.rc == 0, start.output
        up = power_actions(site, seq, "start")
        assert max(up.index(m) for m in MASTERS) < min(up.index(w) for w in WORKERS), f"control plane first: {up}"
        masters = start.task("Approve the control plane's CSRs and wait for it to be Ready")
        workers = start.task("Approve the workers' CSRs and wait for them to be Ready")
        assert sorted((a["node"], a["kind"]) for a in masters["approved"]) == \
            sorted((m, k) for m in MASTERS for k in ("client", "serving")), masters
        assert sorted((a["node"], a["kind"]) for a in workers["approved"]) == \
            sorted((w, k) for w in WORKERS for k in ("client", "serving")), workers
        assert [a["name"] for a in masters["approved"] + workers["approved"]] and \
            {a["name"] for a in masters["approved"] + workers["approved"]} == \
            {c for names in kubelets.csrs.values() for c in names}
        assert stale in [s["name"] for s in masters["skipped_csrs"]], masters
        assert not approved(kube_api, stale) and not approved(kube_api, stranger)
        assert operators.degraded_seen, "the kube-apiserver operator reported the masters NotReady"

    assert all(ready_condition(kube_api, n)["status"] == "True" for n in MASTERS + WORKERS)
    assert not any(cordoned(kube_api).values())
    assert "shutdown" not in site.record(CLUSTER)
    degraded = [op["metadata"]["name"] for op in kube_api.ok("GET", CO)["items"]
                if any(c["type"] == "Degraded" and c["status"] == "True" for c in op["status"]["conditions"])]
    assert degraded == []

    # Started and settled: the rerun only looks.
    seq, version = site.sim.last_seq(), site.record_version(CLUSTER)
    rerun = run_flow("start.yaml", CLUSTER, extra=FAST)
    assert rerun.rc == 0, rerun.output
    assert rerun.changed_tasks() == [] and site.sim.writes_since(seq) == [] and site.record_version(CLUSTER) == version
    assert [c for c in kube_api.ok("GET", CSRS)["items"] if c["metadata"]["name"] == stranger]
