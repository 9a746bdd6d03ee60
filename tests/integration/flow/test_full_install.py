"""site.yaml through every phase — ISO, install waits, credentials in Vault, readiness, ACM import — with
the openshift-install test double (tests/fixtures/bin) and two real kube-apiservers: one plays the new
cluster, the other the ACM hub (importing the hub into itself is refused)."""
from __future__ import annotations

import json
import re
import sys

import pytest

from kube_fixtures import KubeApi, condition, kube_api, spoke_api  # noqa: F401 (pytest fixtures)
from testlib import TEST_CLUSTER_ID as CLUSTER_ID, ansible_core_releases, free_port

# The whole flow runs under every supported ansible-core (the protocol suite covers the module contract
# under each; this covers the roles, playbooks and plugins): the project venv's and the cached venvs of
# scripts/deps/ansible-versions.sh.
CORES = ansible_core_releases()


def make_cluster_ready(api: KubeApi, nodes: list[str]) -> None:
    """Play the installed cluster: ClusterVersion and an operator available, the machine config pools
    updated, every node Ready."""
    if api.get("/apis/config.openshift.io/v1/clusterversions/version") is None:
        api.ok("POST", "/apis/config.openshift.io/v1/clusterversions", {
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
            "spec": {"clusterID": CLUSTER_ID}})
    else:
        # The API servers are shared by the session: a test before this one may have given it another ID.
        api.ok("PATCH", "/apis/config.openshift.io/v1/clusterversions/version", {"spec": {"clusterID": CLUSTER_ID}},
               content_type="application/merge-patch+json")
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
    stable = [condition("Available", "True"), condition("Progressing", "False"), condition("Degraded", "False")]
    api.patch_status("/apis/config.openshift.io/v1/clusteroperators/flow-kube-apiserver", {"conditions": stable})
    # Other tests may have left operators behind: make every one healthy.
    for op in api.ok("GET", "/apis/config.openshift.io/v1/clusteroperators")["items"]:
        api.patch_status(f"/apis/config.openshift.io/v1/clusteroperators/{op['metadata']['name']}",
                         {"conditions": stable})
    mcp = "/apis/machineconfiguration.openshift.io/v1/machineconfigpools"
    for pool in ("master", "worker"):
        if api.get(f"{mcp}/{pool}") is None:
            api.ok("POST", mcp, {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                                 "metadata": {"name": pool}, "spec": {}})
        api.patch_status(f"{mcp}/{pool}", {
            "machineCount": 1, "updatedMachineCount": 1, "readyMachineCount": 1, "degradedMachineCount": 0,
            "unavailableMachineCount": 0,
            "conditions": [condition("Updated", "True"), condition("Degraded", "False")]})
    for existing in api.ok("GET", "/api/v1/nodes")["items"]:
        api.request("DELETE", f"/api/v1/nodes/{existing['metadata']['name']}")
    for name in nodes:
        api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        api.patch_status(f"/api/v1/nodes/{name}", {"conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})


@pytest.mark.parametrize("ansible_venv", [c.venv for c in CORES], ids=[c.id for c in CORES])
def test_every_phase_with_installer_double_vault_and_acm(run_flow, site, kube_api: KubeApi, spoke_api: KubeApi,
                                                         tmp_path, ansible_venv):
    if not (ansible_venv / "bin" / "ansible-playbook").exists():
        pytest.fail(f"{ansible_venv} has no ansible-core: run scripts/deps/ansible-versions.sh (part of `make test-deps`)")
    kubeconfig = tmp_path / "cluster.kubeconfig"
    kubeconfig.write_text(spoke_api.kubeconfig(spoke_api.admin_token))
    make_cluster_ready(spoke_api, ["lab-compact-0", "lab-compact-1", "lab-compact-2"])
    # That release's Python runs the controller-side modules (stat, command, …) too.
    extra = {"acm_wait": False, "ansible_python_interpreter": str(ansible_venv / "bin" / "python")}
    # The hub as AWX's "OpenShift or Kubernetes API Bearer Token" credential gives it: K8S_AUTH_* in the
    # job's environment. They must reach only the ACM import: readiness, which would take K8S_AUTH_HOST
    # and K8S_AUTH_API_KEY over the cluster's kubeconfig, still checks the new cluster.
    env_more = {"PROXSHIFT_TEST_KUBECONFIG": str(kubeconfig), "K8S_AUTH_HOST": kube_api.url,
                "K8S_AUTH_API_KEY": kube_api.admin_token, "K8S_AUTH_SSL_CA_CERT": kube_api.ca_cert,
                "K8S_AUTH_VERIFY_SSL": "True"}

    first = run_flow("site.yaml", "lab-compact", with_installer=True, extra=extra, env_more=env_more)
    assert first.rc == 0, first.output
    # ISO built by the installer, uploaded and attached to every VM.
    vms = site.owned_vms("lab-compact")
    assert len(vms) == 3 and all("iso" in vm["config"].get("ide2", "") for vm in vms), vms
    # The cluster's record in Vault: credentials, identity, phase.
    stored = site.record("lab-compact")
    assert stored and stored["api"] == "https://api.lab-compact.lab.example.com:6443"
    assert stored["phase"] == "imported" and stored["hub"].startswith("https://127.0.0.1:"), sorted(stored)
    assert stored["cluster_id"] == CLUSTER_ID and stored["version"] == "4.19.7"
    assert stored["iso_volid"] == f"local:iso/lab-compact-agent-{stored['iso_sha256'][:12]}.iso"
    assert {vm["config"]["ide2"].split(",")[0] for vm in vms} == {stored["iso_volid"]}
    assert not (site.work / "lab-compact" / ".installed").exists()
    # The kubeconfig the installer wrote (the double copies PROXSHIFT_TEST_KUBECONFIG), not just any JSON.
    # (ansible-core before 2.19 turns a template result that starts with '{' into a mapping, so there the
    # record holds this JSON kubeconfig as an object; the restore writes it back as JSON. An installer's
    # kubeconfig is YAML and stays text in every release.)
    kept = stored["kubeconfig"]
    assert (kept if isinstance(kept, dict) else json.loads(kept)) == json.loads(kubeconfig.read_text())
    # Imported into the hub.
    mc = kube_api.get("/apis/cluster.open-cluster-management.io/v1/managedclusters/lab-compact")
    assert mc and mc["spec"]["hubAcceptsClient"] is True
    assert site.canary not in first.output

    second = run_flow("site.yaml", "lab-compact", with_installer=True, extra=extra, env_more=env_more)
    assert second.rc == 0, second.output
    assert second.changed_tasks() == [], second.changed_tasks()


def test_install_failure_shows_the_installer_log(run_flow, site, spoke_api: KubeApi, tmp_path):
    # The cluster is spoke_api: giving the hub (kube_api) the cluster's ID would make later imports self-imports.
    kubeconfig = tmp_path / "cluster.kubeconfig"
    kubeconfig.write_text(spoke_api.kubeconfig(spoke_api.admin_token))
    make_cluster_ready(spoke_api, ["lab-sno-0"])
    env_more = {"PROXSHIFT_TEST_KUBECONFIG": str(kubeconfig)}
    run = run_flow("site.yaml", "lab-sno", with_installer=True,
                   env_more={**env_more, "PROXSHIFT_TEST_INSTALL_FAIL": "bootstrap-complete"})
    assert run.rc != 0
    assert "bootstrap-complete did not succeed" in run.output, run.output
    assert "ntp-synced" in run.output
    # The VMs stay; a rerun once the problem is fixed converges and finishes.
    assert len(site.owned_vms("lab-sno")) == 1
    assert site.record("lab-sno")["phase"] == "installing"
    rerun = run_flow("site.yaml", "lab-sno", with_installer=True, extra={"acm_hub_kubeconfig": ""}, env_more=env_more)
    assert rerun.rc == 0, rerun.output
    assert site.record("lab-sno")["phase"] == "installed"


def test_interrupted_credentials_and_acm_phases_converge_on_rerun(run_flow, site, kube_api: KubeApi,
                                                                  spoke_api: KubeApi, tmp_path):
    """Vault is sealed while the installer waits, so the first run stops at storing the credentials; the
    sealed Vault also kept its lease, so a rerun is refused until told to break it; the run that breaks it
    finds the ACM hub unreachable and stops at the import. Each failure names its cause, nothing is
    lost or written twice, and the third run finishes without touching the VMs again."""
    kubeconfig = tmp_path / "cluster.kubeconfig"
    kubeconfig.write_text(spoke_api.kubeconfig(spoke_api.admin_token))
    hub_kubeconfig = tmp_path / "hub.kubeconfig"
    hub_kubeconfig.write_text(kube_api.kubeconfig(kube_api.admin_token))
    make_cluster_ready(spoke_api, ["lab-sno-0"])
    kube_api.request("DELETE", "/apis/cluster.open-cluster-management.io/v1/managedclusters/lab-sno")
    env_more = {"PROXSHIFT_TEST_KUBECONFIG": str(kubeconfig)}
    hub = {"acm_hub_kubeconfig": str(hub_kubeconfig), "acm_wait": False}
    stored_path = "openshift/clusters/lab-sno"

    sealer = tmp_path / "seal_vault.py"
    sealer.write_text(
        "import urllib.request\n"
        f"urllib.request.urlopen(urllib.request.Request({site.bao.addr + '/v1/sys/seal'!r}, method='PUT',"
        f" headers={{'X-Vault-Token': {site.bao.token!r}}}))\n")
    sealed = run_flow("site.yaml", "lab-sno", with_installer=True, extra=hub,
                      env_more={**env_more, "PROXSHIFT_TEST_ON_INSTALLED": f"{sys.executable} {sealer}"})
    assert sealed.rc != 0
    failed = [r["task"] for r in sealed.results if r["status"] == "failed"]
    assert len(failed) == 1 and "Store api, kubeconfig and kubeadmin password" in failed[0], failed
    assert re.search(r"(?i)sealed", sealed.output), sealed.output
    vms = {vm["vmid"]: vm["config"]["vmgenid"] for vm in site.owned_vms("lab-sno")}
    assert len(vms) == 1
    site.bao.unseal()
    assert site.bao.kv_get(stored_path)["phase"] == "installing", "a failed write left something behind"
    # Vault was sealed when the run let go of its lease too: the lease stays, said so, and refuses the next
    # run until it expires or is broken by the run id the refusal names (tasks/lease_release.yml).
    assert "could not be released" in sealed.output, sealed.output
    dead_run = site.bao.kv_get(f"{stored_path}/lease")["holder"]["run_id"]
    refused = run_flow("site.yaml", "lab-sno", with_installer=True, extra=hub, env_more=env_more)
    assert refused.rc != 0
    assert [r["task"] for r in refused.results if r["status"] == "failed"] == ["Lease — acquire"], refused.output
    assert f"proxshift_lease_break={dead_run}" in refused.output, refused.output
    assert site.record_version("lab-sno") == 1

    dead_port = free_port()
    dead_hub = tmp_path / "dead-hub.kubeconfig"
    dead_hub.write_text(re.sub(r"https://127\.0\.0\.1:\d+", f"https://127.0.0.1:{dead_port}", hub_kubeconfig.read_text()))
    no_hub = run_flow("site.yaml", "lab-sno", with_installer=True, env_more=env_more,
                      extra={**hub, "acm_hub_kubeconfig": str(dead_hub), "proxshift_lease_break": dead_run})
    assert no_hub.rc != 0
    failed = [r["task"] for r in no_hub.results if r["status"] == "failed"]
    assert len(failed) == 1 and "Import into or detach from the ACM hub" in failed[0], failed
    assert f"127.0.0.1:{dead_port}" in no_hub.output
    assert site.bao.kv_get(stored_path)["api"] == "https://api.lab-sno.lab.example.com:6443"
    assert kube_api.get("/apis/cluster.open-cluster-management.io/v1/managedclusters/lab-sno") is None

    final = run_flow("site.yaml", "lab-sno", with_installer=True, extra=hub, env_more=env_more)
    assert final.rc == 0, final.output
    mc = kube_api.get("/apis/cluster.open-cluster-management.io/v1/managedclusters/lab-sno")
    assert mc and mc["spec"]["hubAcceptsClient"] is True
    # One version per step: the build (installing), installed, imported; nothing written twice.
    assert site.record_version("lab-sno") == 3
    assert site.record("lab-sno")["phase"] == "imported"
    assert {vm["vmid"]: vm["config"]["vmgenid"] for vm in site.owned_vms("lab-sno")} == vms
    assert [t for t in final.changed_tasks() if "VM" in t or "Start" in t] == [], final.changed_tasks()
    for run in (sealed, refused, no_hub, final):
        assert site.canary not in run.output
