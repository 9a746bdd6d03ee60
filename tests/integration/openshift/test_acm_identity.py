"""acm_import and acm_cluster_info on who is behind a name, through real ansible-playbook: two real
kube-apiservers, `kube_api` the hub and `spoke_api` the cluster, the test playing the hub's controllers.
A different cluster behind the same name is imported again; the hub is refused as its own spoke; the hub's
credentials can come from the K8S_AUTH_* variables AWX's bearer-token credential injects."""
from __future__ import annotations

import base64
import json

from kube_fixtures import KubeApi, condition, kube_api, spoke_api, unique  # noqa: F401 (fixtures)

MC = "/apis/cluster.open-cluster-management.io/v1/managedclusters"
CV = "/apis/config.openshift.io/v1/clusterversions"
RECORDED = "proxshift.io/cluster-id"
IMMEDIATE = "import.open-cluster-management.io/immediate-import"


def play(*tasks: dict) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": list(tasks)}])


def task(name: str, args: dict, module: str = "acm_import", **extra) -> dict:
    return {"name": name, f"proxshift.openshift.{module}": args, **extra}


def hub(kube_api: KubeApi, cluster: str, **more) -> dict:
    return {"cluster_name": cluster, "hub_host": kube_api.url, "hub_api_key": kube_api.admin_token,
            "hub_ca_cert": kube_api.ca_cert, "poll_interval": 1, "wait_timeout": 20,
            "klusterlet_addon_config": False, **more}


def set_cluster_id(api: KubeApi, cluster_id: str) -> None:
    """The spoke is (now) the OpenShift cluster with this ID."""
    if api.get(f"{CV}/version") is None:
        api.ok("POST", CV, {"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
                            "metadata": {"name": "version"}, "spec": {"clusterID": cluster_id}})
    else:
        api.ok("PATCH", f"{CV}/version", {"spec": {"clusterID": cluster_id}},
               content_type="application/merge-patch+json")


def hub_imports(kube_api: KubeApi, cluster: str, cluster_id: str) -> None:
    """Play the hub: the klusterlet joined and claims its ID; the auto-import-secret was consumed."""
    kube_api.patch_status(f"{MC}/{cluster}", {
        "conditions": [condition("ManagedClusterImportSucceeded", "True"), condition("ManagedClusterJoined", "True"),
                       condition("ManagedClusterConditionAvailable", "True")],
        "clusterClaims": [{"name": "id.openshift.io", "value": cluster_id}]})
    kube_api.ok("DELETE", f"/api/v1/namespaces/{cluster}/secrets/auto-import-secret")


def annotations(kube_api: KubeApi, cluster: str) -> dict:
    return kube_api.get(f"{MC}/{cluster}")["metadata"].get("annotations", {})


def test_a_new_cluster_behind_the_name_is_imported_again(run_playbook, kube_api: KubeApi, spoke_api: KubeApi,
                                                         tmp_path):
    c = unique("reimp")
    spoke_kc = tmp_path / "spoke.kubeconfig"
    spoke_kc.write_text(spoke_api.kubeconfig(spoke_api.kubeconfig_token))
    args = hub(kube_api, c, spoke_kubeconfig=str(spoke_kc))
    old_id, new_id = f"{c}-old-0000-4000-8000", f"{c}-new-0000-4000-8000"
    set_cluster_id(spoke_api, old_id)

    run = run_playbook(play(task("import", args)))
    assert run.rc == 0, run.output
    assert run.task("import")["spoke_cluster_id"] == old_id
    assert annotations(kube_api, c) == {RECORDED: old_id}
    uid = kube_api.get(f"{MC}/{c}")["metadata"]["uid"]
    hub_imports(kube_api, c, old_id)
    run = run_playbook(play(task("rerun", args)))
    assert run.rc == 0, run.output
    assert run.task("rerun")["changed"] is False
    assert kube_api.get(f"/api/v1/namespaces/{c}/secrets/auto-import-secret") is None

    # The cluster is rebuilt under the same name: a new ClusterVersion ID, the hub still says Joined.
    set_cluster_id(spoke_api, new_id)
    run = run_playbook(play(task("reimport", args)), diff=True)
    assert run.rc == 0, run.output
    r = run.task("reimport")
    assert r["changed"] is True
    acts = [(a["object"], a["action"]) for a in r["actions"]]
    assert acts[0] == (f"ManagedCluster {c}",
                       f"re-imported: a different cluster now has this name (cluster ID {new_id} was {old_id})"), acts
    assert (f"Secret {c}/auto-import-secret", "created") in acts, acts
    secret = kube_api.get(f"/api/v1/namespaces/{c}/secrets/auto-import-secret")
    assert base64.b64decode(secret["data"]["kubeconfig"]).decode() == spoke_kc.read_text()
    mc = kube_api.get(f"{MC}/{c}")
    assert mc["metadata"]["uid"] == uid, "the ManagedCluster is updated in place"
    assert mc["metadata"]["annotations"] == {RECORDED: new_id, IMMEDIATE: ""}
    assert spoke_api.kubeconfig_token not in run.output

    # The hub re-imports and marks the annotation Completed: the next run leaves it so (no import loop).
    kube_api.ok("PATCH", f"{MC}/{c}", {"metadata": {"annotations": {IMMEDIATE: "Completed"}}},
                content_type="application/merge-patch+json")
    hub_imports(kube_api, c, new_id)
    run = run_playbook(play(task("settled", args)))
    assert run.rc == 0, run.output
    assert run.task("settled")["changed"] is False, run.task("settled")
    assert annotations(kube_api, c)[IMMEDIATE] == "Completed"
    assert [m["metadata"]["name"] for m in kube_api.get(MC)["items"]].count(c) == 1


def test_the_hub_is_refused_as_its_own_spoke(run_playbook, kube_api: KubeApi, spoke_api: KubeApi, tmp_path):
    c = unique("self")
    same_url = tmp_path / "hub-as-spoke.kubeconfig"
    same_url.write_text(kube_api.kubeconfig(kube_api.kubeconfig_token))
    # The same cluster under another name (its certificate is also valid for localhost): same cluster ID.
    other_name = tmp_path / "hub-by-another-name.kubeconfig"
    other_name.write_text(kube_api.kubeconfig(kube_api.kubeconfig_token).replace("https://127.0.0.1:", "https://localhost:"))
    created = kube_api.get(f"{CV}/version") is None
    if created:
        set_cluster_id(kube_api, f"{c}-hub-0000-4000-8000")
    hub_id = kube_api.get(f"{CV}/version")["spec"]["clusterID"]
    try:
        run = run_playbook(play(
            task("same url", hub(kube_api, c, spoke_kubeconfig=str(same_url)), ignore_errors=True),
            task("same id", hub(kube_api, c, spoke_kubeconfig=str(other_name)), ignore_errors=True)))
    finally:
        if created:  # other tests play a hub without a ClusterVersion
            kube_api.ok("DELETE", f"{CV}/version")
    same, by_id = run.task("same url"), run.task("same id")
    assert run.status("same url") == "failed" and run.status("same id") == "failed", run.output
    assert same["msg"].startswith(
        f"refusing to import the hub into itself: the spoke's API URL {kube_api.url} is the hub's"), same["msg"]
    assert f"has the hub's cluster ID {hub_id}" in by_id["msg"], by_id["msg"]
    assert same["actions"] == [] and by_id["actions"] == []
    assert kube_api.get(f"{MC}/{c}") is None and kube_api.get(f"/api/v1/namespaces/{c}") is None

def test_hub_credentials_from_the_k8s_auth_environment(run_playbook, kube_api: KubeApi, spoke_api: KubeApi,
                                                       tmp_path):
    """What AWX's "OpenShift or Kubernetes API Bearer Token" credential injects, and nothing else."""
    c = unique("awx")
    spoke_kc = tmp_path / "spoke.kubeconfig"
    spoke_kc.write_text(spoke_api.kubeconfig(spoke_api.kubeconfig_token))
    env = {"K8S_AUTH_HOST": kube_api.url, "K8S_AUTH_API_KEY": kube_api.admin_token,
           "K8S_AUTH_SSL_CA_CERT": kube_api.ca_cert, "K8S_AUTH_VERIFY_SSL": "true"}
    only_spoke = {"cluster_name": c, "spoke_kubeconfig": str(spoke_kc)}
    run = run_playbook(play(task("import", only_spoke), task("read", {"name": c}, module="acm_cluster_info")),
                       env=env)
    assert run.rc == 0, run.output
    assert run.task("import")["changed"] is True
    [found] = run.task("read")["clusters"]
    assert found["name"] == c and found["hub_accepts_client"] is True
    assert kube_api.admin_token not in run.output

    # The role takes the same environment when no hub is given in variables.
    role = {"name": "role", "ansible.builtin.include_role": {"name": "proxshift.openshift.acm"},
            "vars": {"acm_cluster_name": c, "acm_spoke_kubeconfig": str(spoke_kc), "acm_wait": False}}
    run = run_playbook(play(role), env=env)
    assert run.rc == 0, run.output
    assert run.task("proxshift.openshift.acm : Import into or detach from the ACM hub")["changed"] is False
    # Without any hub the role says so and changes nothing.
    run = run_playbook(play(role))
    assert run.rc == 0, run.output
    assert "No ACM hub configured" in run.output
