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
schedulable, the operators stable and the record's note removed; a rerun changes nothing.

With `-e stop_drain=true -e force=true` the workers are drained too (through the Eviction API; the kubelets of
`standins/kubelet.PodTermination` end the evicted pods; DaemonSet and mirror pods stay, as with `oc adm drain
--ignore-daemonsets`; the masters are only cordoned), and a worker whose guest ignores the shutdown (pvesim's
`ignore_shutdown`) is stopped hard by Proxmox at the end of `stop_shutdown_timeout` (`forceStop`), the others
shut down; without `force` that worker stays up and the run fails naming it and what `force` does, and the rerun with
`force` only powers the VMs off (the record notes the shutdown: the nodes were cordoned and drained already)."""
from __future__ import annotations

import contextlib
import datetime as dt
import urllib.parse

import pytest
import yaml

from services import running_pvesim
from standins.cvo import cluster_at
from standins.kubelet import CSRS, PodTermination, allow_csr_creation, approved, client_csr
from standins.restart import CO, NodeDegradedOperators, PoweredKubelets, kubelet_signer, ready_condition
from kube_fixtures import KubeApi, condition, kube_api, unique, wait_until  # noqa: F401 (fixture)

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
    for op in ("kube-apiserver", "etcd"):  # the module's next test installs them again
        kube_api.request("DELETE", f"{CO}/{op}")


def cordoned(kube_api: KubeApi) -> dict[str, bool]:
    return {n: bool(kube_api.get(f"/api/v1/nodes/{n}")["spec"].get("unschedulable")) for n in MASTERS + WORKERS}


def power_actions(site, seq: int, action: str) -> list[str]:
    """The VMs (by name) a power `action` was sent to since `seq`, in order."""
    names = {str(vm["vmid"]): vm["config"]["name"] for vm in site.sim.state()["vms"]}
    return [names[w.split("/qemu/")[1].split("/")[0]] for w in site.sim.writes_since(seq)
            if w.endswith(f"/status/{action}")]


@contextlib.contextmanager
def stubborn_guest(site, tmp_path, stubborn: str):
    """pvesim again, from its state now (`GET /_pvesim/state` is a seed), with the cluster's VMs running (as
    installed) and the guest of `stubborn` ignoring the shutdown request, ACPI and agent alike: the seed's
    `ignore_shutdown`, which pvesim has no run-time switch for. The site talks to this simulator meanwhile."""
    state = site.sim.state()
    owned = {vm["vmid"] for vm in site.owned_vms(CLUSTER)}
    for vm in state["vms"]:
        if vm["vmid"] in owned:
            vm["running"] = True
            vm["ignore_shutdown"] = vm["config"].get("name") == stubborn
    assert [vm["config"]["name"] for vm in state["vms"] if vm["ignore_shutdown"]] == [stubborn]
    for node in state["nodes"]:
        for storage in node["storages"]:
            storage.pop("free", None)  # it counts the VMs' disks, which the seed adds to the storage again
    folder = tmp_path / "sim-stubborn"
    folder.mkdir()
    seed = folder / "seed.yaml"
    seed.write_text(yaml.safe_dump(state))
    before = site.sim
    with running_pvesim(folder, seed=seed) as sim:
        site.sim = sim
        try:
            yield sim
        finally:
            site.sim = before


def workload(kube_api: KubeApi) -> str:
    """Pods of a namespace: `web-0` and `web-1` on two workers, `web-m` on a master, and on the first worker
    what a drain leaves alone: a DaemonSet's pod (`agent-x`) and a static pod's mirror (`static-web-...`)."""
    ns = unique("stop-drain")
    kube_api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    wait_until(lambda: kube_api.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default"), 60,
               lambda: "the service-account controller made no `default` account in 60 s")
    ds = kube_api.ok("POST", f"/apis/apps/v1/namespaces/{ns}/daemonsets", {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {"metadata": {"labels": {"app": "agent"}},
                 "spec": {"containers": [{"name": "c", "image": "registry.example/agent"}]}}}})

    def pod(name: str, node: str, **meta):
        kube_api.ok("POST", f"/api/v1/namespaces/{ns}/pods", {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, **meta}, "spec": {
                        "nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 30,
                        "containers": [{"name": "c", "image": "registry.example/app"}]}})
        kube_api.patch_status(f"/api/v1/namespaces/{ns}/pods/{name}", {
            "phase": "Running", "conditions": [condition("Ready", "True")]})

    pod("web-0", WORKERS[0], labels={"app": "web"})
    pod("web-1", WORKERS[2], labels={"app": "web"})
    pod("web-m", MASTERS[0], labels={"app": "web"})
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": ds["metadata"]["uid"], "controller": True}
    pod("agent-x", WORKERS[0], labels={"app": "agent"}, ownerReferences=[owner])
    pod(f"static-web-{WORKERS[0]}", WORKERS[0], annotations={
        "kubernetes.io/config.mirror": "9d8e7f60a1b2c3d4", "kubernetes.io/config.source": "file"})
    return ns


def pve(site, method: str, path: str):
    """A Proxmox API call with the demo seed's token (it has no root token)."""
    status, body = site.sim._call(method, f"{site.sim.url}/api2/json/{path}",
                                  headers={"Authorization": f"PVEAPIToken=proxshift@pve!ansible={site.token_secret}"})
    assert status == 200, f"{method} {path}: {status} {body}"
    return body["data"]


def shutdown_log(site, vm: dict) -> tuple[str, list[str]]:
    """Exit status and log lines of the VM's last shutdown task."""
    [*_, task] = [t for t in site.sim.admin("GET", "tasks")[1]
                  if t["type"] == "qmshutdown" and t["id"] == str(vm["vmid"])]
    lines = pve(site, "GET", f"nodes/{task['node']}/tasks/{urllib.parse.quote(task['upid'], safe='')}/log")
    return task.get("exitstatus", ""), [line["t"] for line in lines]


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


def test_stop_drains_the_workers_and_stops_hard_a_guest_that_ignores_the_shutdown(run_flow, site, kube_api: KubeApi,
                                                                                    installed, tmp_path):
    assert run_flow("scale.yaml", CLUSTER).rc == 0  # the VMs (the record's nodes: nothing to join)
    ns = workload(kube_api)
    stubborn = WORKERS[2]
    stop_vars = {**FAST, "stop_max_days": 10, "stop_drain": True}
    with stubborn_guest(site, tmp_path, stubborn), PodTermination(kube_api, WORKERS) as kubelets:
        assert all(vm["running"] for vm in site.owned_vms(CLUSTER))
        seq, audit = site.sim.last_seq(), len(kube_api.audit_events())
        stop = run_flow("stop.yaml", CLUSTER, extra={**stop_vars, "force": True})
        assert stop.rc == 0, stop.output

        # The workers drained, the masters only cordoned: the pods evicted through the Eviction API and ended by
        # their kubelets, DaemonSet and mirror pods left on the node.
        drained = {n["name"]: n for n in stop.task("Evacuate the workers' pods")["nodes"]}
        assert sorted(drained) == sorted(WORKERS), drained
        assert drained[WORKERS[0]]["evicted"] == [f"{ns}/web-0"], drained
        assert sorted(drained[WORKERS[0]]["kept"]) == [f"{ns}/agent-x", f"{ns}/static-web-{WORKERS[0]}"], drained
        assert drained[WORKERS[1]]["evicted"] == [] and drained[stubborn]["evicted"] == [f"{ns}/web-1"], drained
        evictions = [e for e in kube_api.audit_events()[audit:] if e["requestURI"].endswith("/eviction")]
        assert sorted(e["requestURI"].rsplit("/", 2)[1] for e in evictions) == ["web-0", "web-1"], evictions
        assert all(e["verb"] == "create" and e["responseStatus"]["code"] == 201 for e in evictions), evictions
        assert sorted(kubelets.deleted) == [f"{ns}/web-0", f"{ns}/web-1"], "the kubelets, not the drain, remove the pods"
        for gone in ("web-0", "web-1"):
            assert kube_api.get(f"/api/v1/namespaces/{ns}/pods/{gone}") is None
        for kept in ("agent-x", f"static-web-{WORKERS[0]}", "web-m"):
            pod = kube_api.get(f"/api/v1/namespaces/{ns}/pods/{kept}")
            assert pod is not None and "deletionTimestamp" not in pod["metadata"], pod
        assert all(cordoned(kube_api).values())

        # Every VM asked to shut down within stop_shutdown_timeout, forced after it (Proxmox's forceStop: no
        # separate hard stop), workers first; the stubborn guest alone outlived it and was terminated.
        down = power_actions(site, seq, "shutdown")
        assert sorted(down) == sorted(MASTERS + WORKERS), down
        assert max(down.index(w) for w in WORKERS) < min(down.index(m) for m in MASTERS), f"workers first: {down}"
        assert power_actions(site, seq, "stop") == []
        asked = [r["params"] for r in site.sim.requests(seq) if r["path"].endswith("/status/shutdown")]
        assert all((p.get("forceStop"), p.get("timeout")) == ("1", "30") for p in asked), asked
        assert not any(vm["running"] for vm in site.owned_vms(CLUSTER))
        for vm in site.owned_vms(CLUSTER):
            exitstatus, log = shutdown_log(site, vm)
            hard = any("terminating now" in line for line in log)
            assert exitstatus == "OK" and hard == (vm["config"]["name"] == stubborn), (vm["config"]["name"], log)
        powered = {v["name"]: v for v in stop.task("proxshift.proxmox.cluster_power : Power the cluster's VMs")["vms"]}
        assert (powered[stubborn]["after"], powered[stubborn]["actions"]) == \
            ("stopped", ["shutdown (forced after timeout)"]), powered[stubborn]

        # Without force the stubborn guest is left running and the run fails naming it.
        for vm in site.owned_vms(CLUSTER):
            pve(site, "POST", f"nodes/{vm['node']}/qemu/{vm['vmid']}/status/start")
        wait_until(lambda: all(vm["running"] for vm in site.owned_vms(CLUSTER)), 30, lambda: "the VMs did not start")
        graceful = run_flow("stop.yaml", CLUSTER, extra=stop_vars)
        assert graceful.rc != 0
        failed = graceful.task("proxshift.proxmox.cluster_power : Power the cluster's VMs")
        assert graceful.status("proxshift.proxmox.cluster_power : Power the cluster's VMs") == "failed"
        assert stubborn in failed["msg"] and "got timeout" in failed["msg"], failed["msg"]
        assert "with force=true Proxmox stops it hard" in failed["msg"], failed["msg"]
        assert [v["name"] for v in failed["vms"] if v["failed"]] == [stubborn], failed["vms"]
        assert stubborn in [vm["config"]["name"] for vm in site.owned_vms(CLUSTER) if vm["running"]]

        # The rerun with force: the record notes the shutdown (the nodes were cordoned), so it only powers off what
        # still runs — it asks nothing of the API, whose control plane may be down by now.
        audit = len(kube_api.audit_events())
        forced = run_flow("stop.yaml", CLUSTER, extra={**stop_vars, "force": True})
        assert forced.rc == 0, forced.output
        assert forced.status("Check that the kubelet CA outlives the shutdown") == "skipped"
        assert forced.status("Evacuate the workers' pods") == "skipped"
        assert not any(vm["running"] for vm in site.owned_vms(CLUSTER))
        assert [e for e in kube_api.audit_events()[audit:] if e["verb"] in ("create", "update", "patch", "delete")
                and ("/api/v1/nodes/" in e["requestURI"] or e["requestURI"].endswith("/eviction"))] == []
    kube_api.request("DELETE", f"/api/v1/namespaces/{ns}")
