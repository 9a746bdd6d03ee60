"""proxshift.openshift.cluster_nodes through real ansible-playbook against the real kube-apiserver 1.34
(see kube_fixtures.py). The tests play the kubelets (CSRs made with `cryptography` and created under the
identity a kubelet has, through impersonation) and the disruption controller (a PodDisruptionBudget's
status); the module's requests are read back from the API server's audit log."""
from __future__ import annotations

import json
import time

from standins.kubelet import (BOOTSTRAPPER, CSRS, SERVING, PodTermination, allow_csr_creation, approved, client_csr,
                              create_csr, make_request, serving_csr)
from kube_fixtures import KubeApi, condition, kube_api, unique, wait_until  # noqa: F401 (fixtures)


def play(*tasks: dict) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": list(tasks)}])


def task(name: str, args: dict, **extra) -> dict:
    return {"name": name, "proxshift.openshift.cluster_nodes": args, **extra}


def conn(api: KubeApi) -> dict:
    return {"api_url": api.url, "api_key": api.admin_token, "ca_cert": api.ca_cert}


def writes_to(api: KubeApi, since: int, fragment: str) -> list[dict]:
    return [e for e in api.audit_events()[since:]
            if e["verb"] in ("create", "update", "patch", "delete") and fragment in e["requestURI"]]


def test_only_the_expected_csrs_are_approved(run_playbook, kube_api: KubeApi):
    allow_csr_creation(kube_api)
    node, other = unique("worker-new"), unique("worker-other")
    good_client = client_csr(kube_api, node)
    good_serving = serving_csr(kube_api, node, ips=["192.0.2.10"])
    other_client = client_csr(kube_api, other)
    args = {**conn(kube_api), "state": "approved", "nodes": [node], "addresses": {node: ["192.0.2.10"]}}
    before = len(kube_api.audit_events())
    run = run_playbook(play(task("check", args, check_mode=True), task("approve", args),
                            task("again", args)))
    assert run.rc == 0, run.output
    check = run.task("check")
    assert check["changed"] is True
    assert {(c["name"], c["kind"]) for c in check["approved"]} == {(good_client, "client"), (good_serving, "serving")}
    assert other_client in [u["name"] for u in check["unexpected_csrs"]]
    first = run.task("approve")
    assert first["changed"] is True and len(first["approved"]) == 2
    assert run.task("again")["changed"] is False
    assert approved(kube_api, good_client) and approved(kube_api, good_serving)
    assert not approved(kube_api, other_client), "a CSR for another node must never be approved"
    approvals = writes_to(kube_api, before, "/approval")
    assert sorted(e["objectRef"]["name"] for e in approvals) == sorted([good_client, good_serving])


def test_a_csr_claiming_an_expected_node_wrongly_fails_and_approves_nothing(run_playbook, kube_api):
    allow_csr_creation(kube_api)
    node, node2 = unique("worker-x"), unique("worker-y")
    good = client_csr(kube_api, node)
    forged = client_csr(kube_api, node, user="mallory", groups=["system:authenticated"])
    extra_san = serving_csr(kube_api, node2, dns=[node2, "api.example.com"])
    before = len(kube_api.audit_events())
    run = run_playbook(play(task("approve", {**conn(kube_api), "state": "approved", "nodes": [node, node2]},
                                 ignore_errors=True)))
    assert run.rc == 0, run.output
    assert run.status("approve") == "failed"
    r = run.task("approve")
    assert forged in r["msg"] and "mallory" in r["msg"]
    assert extra_san in r["msg"] and "api.example.com" in r["msg"]
    assert r["changed"] is False and r["approved"] == []
    assert not approved(kube_api, good), "nothing is approved when a CSR claims the node wrongly"
    assert writes_to(kube_api, before, "/approval") == []


def test_ready_waits_and_names_the_nodes_that_are_not(run_playbook, kube_api):
    up, down = unique("worker-up"), unique("worker-down")
    for n, s in ((up, "True"), (down, "False")):
        kube_api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}})
        kube_api.patch_status(f"/api/v1/nodes/{n}", {"conditions": [condition("Ready", s, "kubelet says so")]})
    missing = unique("worker-missing")
    allow_csr_creation(kube_api)
    serving = serving_csr(kube_api, up)
    run = run_playbook(play(
        task("up", {**conn(kube_api), "state": "ready", "nodes": [up], "timeout": 0, "approve_csrs": True}),
        task("down", {**conn(kube_api), "state": "ready", "nodes": [up, down, missing], "timeout": 2,
                      "poll_interval": 1}, ignore_errors=True),
    ))
    assert run.rc == 0, run.output
    first = run.task("up")
    assert first["nodes"][0]["ready"] is True
    assert first["changed"] is True and [c["name"] for c in first["approved"]] == [serving]
    assert approved(kube_api, serving)
    msg = run.task("down")["msg"]
    assert f"{down}: Ready=False (Test: kubelet says so)" in msg and f"{missing}: not registered" in msg
    assert f"{up}:" not in msg
    for n in (up, down):  # other tests wait for every Node of the shared API server to be Ready
        kube_api.ok("DELETE", f"/api/v1/nodes/{n}")


def namespace_with_default_account(api: KubeApi, prefix: str) -> str:
    """A new namespace once the service-account controller has made its `default` account (pods need it)."""
    ns = unique(prefix)
    api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    wait_until(lambda: api.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default"), 60,
               lambda: "the service-account controller made no `default` account in 60 s")
    return ns


def make_workload(api: KubeApi, node: str):
    """A namespace with a DaemonSet pod and a web pod covered by a PodDisruptionBudget, both on `node`."""
    ns = namespace_with_default_account(api, "drain")
    labels = {"app": "agent"}
    ds = api.ok("POST", f"/apis/apps/v1/namespaces/{ns}/daemonsets", {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                 "spec": {"containers": [{"name": "c", "image": "registry.example/agent"}]}}}})

    def pod(name, labels, owner=None):
        meta = {"name": name, "labels": labels}
        if owner:
            meta["ownerReferences"] = [owner]
        api.ok("POST", f"/api/v1/namespaces/{ns}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
            "nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "c", "image": "registry.example/app"}]}})

    pod("agent-x", labels, {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                            "uid": ds["metadata"]["uid"], "controller": True})
    pod("web-0", {"app": "web"})
    # Play the kubelet: the Eviction API ignores budgets for Pending pods (registry/core/pod/storage/eviction.go,
    # canIgnorePDB), so the web pod must be Running for its budget to count.
    api.patch_status(f"/api/v1/namespaces/{ns}/pods/web-0", {
        "phase": "Running", "conditions": [condition("Ready", "True")]})
    api.ok("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    return ns


def pdb_allows(api: KubeApi, ns: str, allowed: int):
    """Play the disruption controller (not run by the test harness)."""
    api.patch_status(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/web", {
        "observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": 1,
        "desiredHealthy": 1 - allowed, "expectedPods": 1})


def test_drain_respects_the_budget_then_removes_the_node(run_playbook, kube_api):
    node, master = unique("worker-old"), unique("master")
    kube_api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    kube_api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": master, "labels": {"node-role.kubernetes.io/master": ""}}})
    ns = make_workload(kube_api, node)
    pdb_allows(kube_api, ns, 0)
    args = {**conn(kube_api), "nodes": [node], "drain_timeout": 2, "poll_interval": 1}
    before = len(kube_api.audit_events())
    run = run_playbook(play(
        task("check", {**args, "state": "absent"}, check_mode=True, diff=True),
        task("blocked", {**args, "state": "drained"}, ignore_errors=True),
        task("master", {**conn(kube_api), "nodes": [master], "state": "absent"}, ignore_errors=True),
    ))
    assert run.rc == 0, run.output
    check = run.task("check")
    assert check["changed"] is True
    [report] = check["nodes"]
    assert report["evict"] == [f"{ns}/web-0"] and report["kept"] == [f"{ns}/agent-x"]
    assert report["cordon"] is True
    blocked = run.task("blocked")
    assert run.status("blocked") == "failed"
    assert f"pod {ns}/web-0: blocked by PodDisruptionBudget {ns}/web" in blocked["msg"], blocked["msg"]
    assert "uncordoned" in blocked["msg"] and blocked["evicted"] == []
    assert "control-plane" in run.task("master")["msg"]
    assert not kube_api.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable"), "uncordoned again"
    assert kube_api.get(f"/api/v1/namespaces/{ns}/pods/web-0") is not None
    writes = [e for e in kube_api.audit_events()[before:] if e["verb"] in ("create", "patch", "delete", "update")]
    evictions = [e for e in writes if e["requestURI"].endswith("/web-0/eviction")]
    assert len(evictions) >= 2 and all(e["responseStatus"]["code"] == 429 for e in evictions), \
        "a 429 is tried again until drain_timeout"
    assert [e["verb"] for e in writes if "/nodes/" in e["requestURI"]] == ["patch", "patch"], \
        "check mode writes nothing; the blocked drain cordons and uncordons, the master is not touched"

    pdb_allows(kube_api, ns, 1)
    # The evicted pod ends with its grace period (30 s): its kubelet stops it, then removes it.
    longer = {**args, "drain_timeout": 60}
    with PodTermination(kube_api, [node]) as kubelet:
        run = run_playbook(play(task("remove", {**longer, "state": "absent"}), task("again", {**longer, "state": "absent"})))
    assert run.rc == 0, run.output
    assert kubelet.deleted == [f"{ns}/web-0"], "the kubelet, not the drain, removes the pod"
    removed = run.task("remove")
    assert removed["changed"] is True and removed["nodes"][0]["evicted"] == [f"{ns}/web-0"]
    assert removed["nodes"][0]["deleted"] is True
    assert run.task("again")["changed"] is False
    assert kube_api.get(f"/api/v1/nodes/{node}") is None
    assert kube_api.get(f"/api/v1/namespaces/{ns}/pods/web-0") is None
    assert kube_api.get(f"/api/v1/namespaces/{ns}/pods/agent-x") is not None, "DaemonSet pods are not evicted"
    assert kube_api.get(f"/api/v1/nodes/{master}") is not None
    kube_api.ok("DELETE", f"/api/v1/nodes/{master}")


def test_a_dead_worker_is_drained_and_removed(run_playbook, kube_api):
    """A worker whose kubelet died: the real node-lifecycle controller marks it Ready=Unknown and taints it
    unreachable; its Running pod (grace period an hour, longer than the drain may take), once evicted, stays
    Terminating for ever since no kubelet confirms it. It is evicted with a grace period of 1 s (Cluster API's and
    the OpenShift Machine API's drain of unreachable nodes), the drain stops waiting for it past that plus
    skip_wait_for_delete_timeout (default 1 s) and the Node is deleted — before, the drain waited out the pod's own
    grace period and timed out, uncordoned the node and never deleted it. The node is cordoned before its pods are
    listed."""
    node = unique("worker-dead")
    kube_api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    kube_api.patch_status(f"/api/v1/nodes/{node}", {"conditions": [condition("Ready", "True")]})
    ns = namespace_with_default_account(kube_api, "dead")
    kube_api.ok("POST", f"/api/v1/namespaces/{ns}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"},
                "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 3600,
                         "containers": [{"name": "c", "image": "registry.example/app"}]}})
    kube_api.patch_status(f"/api/v1/namespaces/{ns}/pods/web-0", {"phase": "Running", "conditions": [condition("Ready", "True")]})
    kube_api.stop_kubelet(node)
    def lifecycle() -> tuple[dict, list[str]]:
        obj = kube_api.get(f"/api/v1/nodes/{node}")
        return (next(c for c in obj["status"]["conditions"] if c["type"] == "Ready"),
                [t["key"] for t in obj["spec"].get("taints", [])])

    def unreachable() -> bool:
        ready, taints = lifecycle()
        return ready["status"] == "Unknown" and "node.kubernetes.io/unreachable" in taints
    wait_until(unreachable, 120, lambda: f"node-lifecycle did not mark {node} unreachable: {lifecycle()}", interval=1)
    before = len(kube_api.audit_events())
    run = run_playbook(play(task("remove", {**conn(kube_api), "state": "absent", "nodes": [node], "drain_timeout": 180,
                                            "poll_interval": 2})))
    assert run.rc == 0, run.output
    pod = kube_api.get(f"/api/v1/namespaces/{ns}/pods/web-0")
    assert pod is None or pod["metadata"]["deletionGracePeriodSeconds"] == 1, pod
    [report] = run.task("remove")["nodes"]
    assert report["evict"] == [f"{ns}/web-0"] and report["left_terminating"] == [f"{ns}/web-0"], report
    assert report["deleted"] is True
    assert kube_api.get(f"/api/v1/nodes/{node}") is None
    events = kube_api.audit_events()[before:]
    cordon = next(i for i, e in enumerate(events) if e["verb"] == "patch" and e["requestURI"].startswith(f"/api/v1/nodes/{node}"))
    listed = next(i for i, e in enumerate(events) if e["verb"] == "list" and "spec.nodeName" in e["requestURI"]
                  and node in e["requestURI"])
    assert cordon < listed, "the node is cordoned before its pods are listed"
    assert not [e for e in events if e["verb"] == "delete" and "/pods/" in e["requestURI"]], \
        "the pod is evicted with its grace period, never force-deleted"
    kube_api.request("DELETE", f"/api/v1/namespaces/{ns}")


def test_only_the_newest_client_csr_made_after_the_vm_started_is_approved(run_playbook, kube_api):
    """As the machine-approver: a CSR created before the node's VM started is stale, and of a node's client
    CSRs only the newest is approved (a kubelet that retried holds only the newest key); both reported."""
    allow_csr_creation(kube_api)
    node = unique("worker-fresh")
    stale = client_csr(kube_api, node)
    time.sleep(15)  # more than the machine-approver's 10 s clock skew
    started = time.time()
    older = client_csr(kube_api, node)
    time.sleep(1.1)  # creationTimestamp has a resolution of one second
    newest = client_csr(kube_api, node)
    uptime = int(time.time() - started) + 1
    args = {**conn(kube_api), "state": "approved", "nodes": [node], "vm_uptimes": {node: uptime}}
    run = run_playbook(play(task("approve", args), task("again", args)))
    assert run.rc == 0, run.output
    r = run.task("approve")
    assert [c["name"] for c in r["approved"]] == [newest], r
    skipped = {c["name"]: c["reason"] for c in r["skipped_csrs"]}
    assert "before the VM" in skipped[stale] and "not the newest client CSR" in skipped[older], skipped
    assert run.task("again")["changed"] is False, "the older CSR is never approved later either"
    assert approved(kube_api, newest) and not approved(kube_api, older) and not approved(kube_api, stale)
