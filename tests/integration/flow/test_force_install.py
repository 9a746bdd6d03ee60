"""`-e force_install=true` on a cluster imported into ACM, through site.yaml with the installer double,
pvesim, OpenBao and two real kube-apiservers (`spoke_api` the cluster, `kube_api` the hub): the preflight
runs first and a failing one deletes nothing; then the old cluster is detached from the hub, only the
owned VMs are deleted, and the rebuilt cluster is imported afresh (the hub's kubeconfig read from Vault)."""
from __future__ import annotations

import time

import pytest

from kube_fixtures import KubeApi, condition, kube_api, spoke_api  # noqa: F401 (pytest fixtures)
from test_full_install import make_cluster_ready

MC = "/apis/cluster.open-cluster-management.io/v1/managedclusters"
CV = "/apis/config.openshift.io/v1/clusterversions/version"
OLD_ID = "6c1f5a2e-0000-4000-8000-00000000aa01"
NEW_ID = "6c1f5a2e-0000-4000-8000-00000000bb02"
DETACH_OR_IMPORT = "Import into or detach from the ACM hub"


def forget_on_hub(hub: KubeApi, cluster: str) -> None:
    """Start from a hub that has never seen the cluster (other tests import the same inventory names)."""
    hub.request("DELETE", f"{MC}/{cluster}")
    hub.request("DELETE", f"/api/v1/namespaces/{cluster}")
    # Bounded by polls, not by a clock: the namespace controller finishes the deletion in the background.
    for _ in range(240):
        if hub.get(f"/api/v1/namespaces/{cluster}") is None and hub.get(f"{MC}/{cluster}") is None:
            return
        time.sleep(0.5)
    pytest.fail(f"namespace {cluster} was not deleted on the hub")


def set_cluster_id(api: KubeApi, cluster_id: str) -> None:
    api.ok("PATCH", CV, {"spec": {"clusterID": cluster_id}}, content_type="application/merge-patch+json")


def events(run) -> list[str]:
    """The steps of a run that matter here, in the order they ran."""
    out = []
    for r in run.results:
        if r["status"] == "skipped":
            continue
        if r["task"].startswith("Preflight — report"):
            out.append("preflight")
        elif r["task"].endswith("Converge the cluster's VMs"):
            out.append("vms")
        elif r["task"].endswith(DETACH_OR_IMPORT):
            out.append("detach" if "detached" in r["result"].get("msg", "") else "import")
    return out


def test_force_install_detaches_then_imports_the_rebuilt_cluster(run_flow, site, kube_api: KubeApi,
                                                                 spoke_api: KubeApi, tmp_path):
    cluster_kc = tmp_path / "cluster.kubeconfig"
    cluster_kc.write_text(spoke_api.kubeconfig(spoke_api.admin_token))
    # The hub is one this project built: its kubeconfig is in its record in Vault.
    site.bao.kv_put("openshift/clusters/hub1", {"kubeconfig": kube_api.kubeconfig(kube_api.admin_token)})
    make_cluster_ready(spoke_api, ["lab-sno-0"])
    set_cluster_id(spoke_api, OLD_ID)
    forget_on_hub(kube_api, "lab-sno")
    extra = {"acm_hub_cluster": "hub1", "acm_wait": False}
    env_more = {"PROXSHIFT_TEST_KUBECONFIG": str(cluster_kc)}

    # The installer double records the ID the cluster's ClusterVersion reports (the record must match it).
    first = run_flow("site.yaml", "lab-sno", with_installer=True, extra=extra,
                     env_more={**env_more, "PROXSHIFT_TEST_CLUSTER_ID": OLD_ID})
    assert first.rc == 0, first.output
    old_mc = kube_api.get(f"{MC}/lab-sno")
    assert old_mc["metadata"]["annotations"]["proxshift.io/cluster-id"] == OLD_ID
    # Play the hub: the klusterlet joined and claims the old ID; the auto-import-secret was consumed.
    kube_api.patch_status(f"{MC}/lab-sno", {
        "conditions": [condition("ManagedClusterImportSucceeded", "True"), condition("ManagedClusterJoined", "True"),
                       condition("ManagedClusterConditionAvailable", "True")],
        "clusterClaims": [{"name": "id.openshift.io", "value": OLD_ID}]})
    kube_api.ok("DELETE", "/api/v1/namespaces/lab-sno/secrets/auto-import-secret")
    [old_vm] = site.owned_vms("lab-sno")
    old_iso = site.record("lab-sno")["iso_volid"]
    assert any(old_iso in isos for isos in site.sim.iso_files().values())

    # The rebuilt cluster is a new OpenShift cluster: a new ClusterVersion ID behind the same name.
    set_cluster_id(spoke_api, NEW_ID)
    forced = run_flow("site.yaml", "lab-sno", with_installer=True, extra={**extra, "force_install": True},
                      env_more={**env_more, "PROXSHIFT_TEST_CLUSTER_ID": NEW_ID})
    assert forced.rc == 0, forced.output
    # Preflight (its VM plan, then the verdict), the rebuilt VMs planned as new ones, detach, delete the
    # VMs, create them, import.
    assert events(forced) == ["vms", "preflight", "vms", "detach", "vms", "vms", "import"], events(forced)
    detach = next(r["result"] for r in forced.results
                  if r["task"].endswith(DETACH_OR_IMPORT) and "detached" in r["result"].get("msg", ""))
    assert [a["action"] for a in detach["actions"]] == ["deleted", "deleted"], detach

    [new_vm] = site.owned_vms("lab-sno")
    assert new_vm["config"]["vmgenid"] != old_vm["config"]["vmgenid"]
    assert site.sim.vm(100) is not None, "the bastion (not ours) was touched"
    mcs = [m for m in kube_api.get(MC)["items"] if m["metadata"]["name"] == "lab-sno"]
    assert len(mcs) == 1, mcs
    [mc] = mcs
    assert mc["metadata"]["uid"] != old_mc["metadata"]["uid"], "the old ManagedCluster was not detached"
    assert mc["metadata"]["annotations"]["proxshift.io/cluster-id"] == NEW_ID
    assert "conditions" not in mc.get("status", {}), "the new ManagedCluster carries the old one's state"
    secret = kube_api.get("/api/v1/namespaces/lab-sno/secrets/auto-import-secret")
    assert secret is not None, "the auto-import-secret was not written for the new cluster"
    # The record tells the new cluster's story: imported into the hub read from Vault, the new ID.
    record = site.record("lab-sno")
    assert (record["phase"], record["hub"], record["cluster_id"]) == ("imported", "hub1", NEW_ID), sorted(record)
    assert site.canary not in forced.output and kube_api.admin_token not in forced.output
    # The replaced build's ISO (the old pull secret and admin credentials) went with its VM; the new one is there.
    # (The installer double builds the same ISO from the same inputs: the new build has the old one's name.)
    removed = [r["result"]["iso_removed"] for r in forced.results if r["result"].get("iso_removed")]
    assert [[v["volid"] for v in r] for r in removed] == [[old_iso]], removed
    assert any(record["iso_volid"] in s for s in site.sim.iso_files().values()), site.sim.iso_files()


def test_force_install_with_a_failing_preflight_deletes_nothing(run_flow, site, kube_api: KubeApi, tmp_path):
    assert run_flow("site.yaml", "lab-sno").rc == 0
    [vm] = site.owned_vms("lab-sno")
    kept = site.work / "lab-sno" / "kept-file"
    kept.write_text("from the running install")
    hub_kc = tmp_path / "hub.kubeconfig"
    hub_kc.write_text(kube_api.kubeconfig(kube_api.admin_token))
    forget_on_hub(kube_api, "lab-sno")
    mc = kube_api.ok("POST", MC, {"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                                  "metadata": {"name": "lab-sno"}, "spec": {"hubAcceptsClient": True}})
    seq = site.sim.last_seq()
    forced = {"force_install": True, "acm_hub_kubeconfig": str(hub_kc), "preflight_check_dns": False}

    # The new cluster would not fit: preflight stops the run before anything is deleted.
    run = run_flow("site.yaml", "lab-sno", extra=forced, args=["-e", '{"vm_defaults": {"memory": 9999999}}'])
    assert run.rc != 0
    assert "the rebuilt cluster's VMs would not fit" in run.output, run.output
    assert "needs 9765.6 GiB" in run.output, run.output
    assert "detach" not in events(run) and events(run).count("vms") == 2, events(run)
    # --tags vms alone would skip the preflight and the rebuild: refused before anything is read or deleted.
    only_vms = run_flow("site.yaml", "lab-sno", extra=forced, tags="vms")
    assert only_vms.rc != 0
    [refused] = [r for r in only_vms.results if r["status"] == "failed"]
    assert "forced reinstall" in refused["task"], refused["task"]
    assert "leaves out preflight, manifests, iso" in refused["result"]["msg"], refused["result"]["msg"]

    assert site.sim.writes_since(seq) == []
    [still] = site.owned_vms("lab-sno")
    assert still["config"]["vmgenid"] == vm["config"]["vmgenid"]
    assert kept.exists()
    assert kube_api.get(f"{MC}/lab-sno")["metadata"]["uid"] == mc["metadata"]["uid"]
    forget_on_hub(kube_api, "lab-sno")
