"""site.yaml through every phase — ISO, install waits, credentials in Vault, readiness, ACM import — with
the openshift-install test double (tests/fixtures/bin) and a real kube-apiserver playing both the new
cluster and the ACM hub."""
from __future__ import annotations

import json

from kube_fixtures import KubeApi, condition, kube_api  # noqa: F401 (pytest fixture)


def make_cluster_ready(api: KubeApi, nodes: list[str]) -> None:
    """Play the installed cluster: ClusterVersion and an operator available, every node Ready."""
    if api.get("/apis/config.openshift.io/v1/clusterversions/version") is None:
        api.ok("POST", "/apis/config.openshift.io/v1/clusterversions", {
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
            "spec": {"clusterID": "6c1f5a2e-0000-4000-8000-0000000000f1"}})
    api.patch_status("/apis/config.openshift.io/v1/clusterversions/version", {
        "desired": {"version": "4.19.7", "image": "quay.io/x@sha256:0"}, "observedGeneration": 1, "versionHash": "x",
        "availableUpdates": [],
        "history": [{"state": "Completed", "version": "4.19.7", "image": "x", "verified": False,
                     "startedTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T01:00:00Z"}],
        "conditions": [condition("Available", "True"), condition("Progressing", "False"), condition("Failing", "False")]})
    if api.get("/apis/config.openshift.io/v1/clusteroperators/flow-kube-apiserver") is None:
        api.ok("POST", "/apis/config.openshift.io/v1/clusteroperators", {
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
            "metadata": {"name": "flow-kube-apiserver"}, "spec": {}})
    api.patch_status("/apis/config.openshift.io/v1/clusteroperators/flow-kube-apiserver", {
        "conditions": [condition("Available", "True"), condition("Degraded", "False")]})
    # Other tests may have left operators behind: make every one healthy.
    for op in api.ok("GET", "/apis/config.openshift.io/v1/clusteroperators")["items"]:
        api.patch_status(f"/apis/config.openshift.io/v1/clusteroperators/{op['metadata']['name']}", {
            "conditions": [condition("Available", "True"), condition("Degraded", "False")]})
    for existing in api.ok("GET", "/api/v1/nodes")["items"]:
        api.request("DELETE", f"/api/v1/nodes/{existing['metadata']['name']}")
    for name in nodes:
        api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        api.patch_status(f"/api/v1/nodes/{name}", {"conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})


def test_every_phase_with_installer_double_vault_and_acm(run_flow, site, kube_api: KubeApi, tmp_path):
    kubeconfig = tmp_path / "cluster.kubeconfig"
    kubeconfig.write_text(kube_api.kubeconfig(kube_api.admin_token))
    make_cluster_ready(kube_api, ["lab-compact-0", "lab-compact-1", "lab-compact-2"])
    extra = {"acm_hub_kubeconfig": str(kubeconfig), "acm_wait": False}
    env_more = {"PROXSHIFT_TEST_KUBECONFIG": str(kubeconfig)}

    first = run_flow("site.yaml", "lab-compact", with_installer=True, extra=extra, env_more=env_more)
    assert first.rc == 0, first.output
    # ISO built by the installer, uploaded and attached to every VM.
    vms = site.owned_vms("lab-compact")
    assert len(vms) == 3 and all("iso" in vm["config"].get("ide2", "") for vm in vms), vms
    assert "Cluster is installed" in first.output or (site.work / "lab-compact" / ".installed").exists()
    # Credentials stored in Vault.
    stored = site.bao.kv_get("openshift/clusters/lab-compact")
    assert stored and stored["api"] == "https://api.lab-compact.lab.example.com:6443"
    assert json.loads(json.dumps(stored))["kubeconfig"].startswith("{")
    # Imported into the hub.
    mc = kube_api.get("/apis/cluster.open-cluster-management.io/v1/managedclusters/lab-compact")
    assert mc and mc["spec"]["hubAcceptsClient"] is True
    assert site.canary not in first.output

    second = run_flow("site.yaml", "lab-compact", with_installer=True, extra=extra, env_more=env_more)
    assert second.rc == 0, second.output
    assert second.changed_tasks() == [], second.changed_tasks()


def test_install_failure_shows_the_installer_log(run_flow, site, tmp_path):
    run = run_flow("site.yaml", "lab-sno", with_installer=True,
                   env_more={"PROXSHIFT_TEST_INSTALL_FAIL": "bootstrap-complete"})
    assert run.rc != 0
    assert "bootstrap-complete did not succeed" in run.output, run.output
    assert "ntp-synced" in run.output
    # The VMs stay; a rerun once the problem is fixed converges and finishes.
    assert len(site.owned_vms("lab-sno")) == 1
    rerun = run_flow("site.yaml", "lab-sno", with_installer=True, extra={"acm_hub_kubeconfig": ""})
    assert (site.work / "lab-sno" / ".installed").exists(), rerun.output
