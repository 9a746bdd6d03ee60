"""proxshift.openshift.acm_import through real ansible-playbook against a real kube-apiserver with the
upstream ACM CRDs; the test plays the hub's controllers (see kube_fixtures.py)."""
from __future__ import annotations

import json

import yaml

from kube_fixtures import KubeApi, b64, condition, kube_api, spoke_api, unique  # noqa: F401 (fixtures)

SPOKE_TOKEN = "spoke-token-canary-py-51c0"
MC = "/apis/cluster.open-cluster-management.io/v1/managedclusters"


def play(*tasks: dict) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": list(tasks)}])


def task(name: str, args: dict, **extra) -> dict:
    return {"name": name, "proxshift.openshift.acm_import": args, **extra}


def hub(kube_api: KubeApi, cluster: str, **more) -> dict:
    return {"cluster_name": cluster, "hub_host": kube_api.url, "hub_api_key": kube_api.admin_token,
            "hub_ca_cert": kube_api.ca_cert, "poll_interval": 1, "wait_timeout": 20, **more}


def test_auto_import_check_create_rerun_labels_wait(run_playbook, kube_api: KubeApi):
    c = unique("auto")
    args = hub(kube_api, c, spoke_host="https://api.spoke.example.com:6443", spoke_api_key=SPOKE_TOKEN,
               labels={"env": "lab"}, clusterset="lab-set")
    run = run_playbook(play(task("import", args)), check=True, diff=True)
    assert run.rc == 0, run.output
    assert run.task("import")["changed"] is True
    assert "ManagedCluster" in run.stdout and "+++ after" in run.stdout, run.stdout
    assert kube_api.get(f"{MC}/{c}") is None, "check mode must not write"

    run = run_playbook(play(task("import", args), task("again", args)), verbosity=2)
    assert run.rc == 0, run.output
    first = run.task("import")
    assert first["changed"] is True
    assert [a["action"] for a in first["actions"]] == ["created"] * 4
    assert run.task("again")["changed"] is False
    assert SPOKE_TOKEN not in run.output
    secret = kube_api.get(f"/api/v1/namespaces/{c}/secrets/auto-import-secret")
    assert secret["data"]["token"] == b64(SPOKE_TOKEN)
    uid = kube_api.get(f"{MC}/{c}")["metadata"]["uid"]

    # Hub-detected labels stay; the user's label change merges in place.
    kube_api.ok("PATCH", f"{MC}/{c}", {"metadata": {"labels": {"cloud": "Other", "vendor": "OpenShift"}}},
                content_type="application/merge-patch+json")
    run = run_playbook(play(task("relabel", {**args, "labels": {"env": "prod"}})), diff=True)
    assert run.rc == 0, run.output
    assert run.task("relabel")["changed"] is True
    assert '-        "env": "lab"' in run.stdout or '"env": "lab"' in run.stdout, run.stdout
    mc = kube_api.get(f"{MC}/{c}")
    assert mc["metadata"]["uid"] == uid
    labels = mc["metadata"]["labels"]
    assert (labels["env"], labels["cloud"], labels["vendor"]) == ("prod", "Other", "OpenShift")
    assert labels["cluster.open-cluster-management.io/clusterset"] == "lab-set"

    # Waiting: times out and names the missing conditions; succeeds once the hub reports them.
    args = {**args, "labels": {"env": "prod"}}
    run = run_playbook(play(task("wait", {**args, "wait": True, "wait_timeout": 2}, ignore_errors=True)))
    msg = run.task("wait")["msg"]
    assert "ManagedClusterJoined=True (not reported yet)" in msg, msg
    kube_api.patch_status(f"{MC}/{c}", {"conditions": [
        condition("ManagedClusterImportSucceeded", "True"), condition("ManagedClusterJoined", "True"),
        condition("ManagedClusterConditionAvailable", "True")]})
    kube_api.ok("DELETE", f"/api/v1/namespaces/{c}/secrets/auto-import-secret")
    run = run_playbook(play(task("wait", {**args, "wait": True})))
    assert run.rc == 0, run.output
    r = run.task("wait")
    assert r["changed"] is False and r["joined"] is True and r["available"] is True
    assert kube_api.get(f"/api/v1/namespaces/{c}/secrets/auto-import-secret") is None


def import_secret(c: str, agent_ns: str, bootstrap: str) -> dict:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "klusterlets.operator.open-cluster-management.io"},
           "spec": {"group": "operator.open-cluster-management.io", "scope": "Cluster",
                    "names": {"kind": "Klusterlet", "listKind": "KlusterletList", "plural": "klusterlets",
                              "singular": "klusterlet"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": agent_ns}},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": "bootstrap-hub-kubeconfig", "namespace": agent_ns}, "data": {"kubeconfig": b64(bootstrap)}},
        {"apiVersion": "operator.open-cluster-management.io/v1", "kind": "Klusterlet",
         "metadata": {"name": f"klusterlet-{c}"}, "spec": {"clusterName": c, "namespace": agent_ns}},
    ]
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{c}-import", "namespace": c},
            "data": {"crds.yaml": b64(yaml.safe_dump(crd)), "import.yaml": b64(yaml.safe_dump_all(docs))}}


def test_manual_import_and_conflicts(run_playbook, kube_api: KubeApi, spoke_api: KubeApi, tmp_path):
    c = unique("man")
    agent_ns = f"ocm-agent-{c}"
    spoke_kc = tmp_path / "spoke.kubeconfig"
    spoke_kc.write_text(spoke_api.kubeconfig(spoke_api.kubeconfig_token))
    # The hub has already rendered the import secret (its namespace exists).
    kube_api.ok("POST", "/api/v1/namespaces", {"metadata": {"name": c}})
    kube_api.ok("POST", f"/api/v1/namespaces/{c}/secrets", import_secret(c, agent_ns, "bootstrap-v1"))
    args = hub(kube_api, c, mode="manual", spoke_kubeconfig=str(spoke_kc), klusterlet_addon_config=False)
    run = run_playbook(play(task("manual", args), task("again", args)))
    assert run.rc == 0, run.output
    r = run.task("manual")
    assert r["changed"] is True
    assert [o["object"] for o in r["spoke_objects"]] == [
        "CustomResourceDefinition klusterlets.operator.open-cluster-management.io", f"Namespace {agent_ns}",
        f"Secret {agent_ns}/bootstrap-hub-kubeconfig", f"Klusterlet klusterlet-{c}"]
    assert run.task("again")["changed"] is False
    assert spoke_api.get(f"/apis/operator.open-cluster-management.io/v1/klusterlets/klusterlet-{c}")["spec"]["clusterName"] == c

    # Someone else took over the bootstrap secret's data; a new import manifest now conflicts.
    spoke_api.ok("PATCH", f"/api/v1/namespaces/{agent_ns}/secrets/bootstrap-hub-kubeconfig?fieldManager=hand-edit&force=true",
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bootstrap-hub-kubeconfig", "namespace": agent_ns},
                 "data": {"kubeconfig": b64("edited")}}, content_type="application/apply-patch+yaml")
    kube_api.ok("PUT", f"/api/v1/namespaces/{c}/secrets/{c}-import", import_secret(c, agent_ns, "bootstrap-v2"))
    run = run_playbook(play(task("conflict", args, ignore_errors=True), task("forced", {**args, "force_conflicts": True})))
    msg = run.task("conflict")["msg"]
    assert "HTTP 409 conflict" in msg and "hand-edit" in msg and "force_conflicts" in msg, msg
    assert run.task("forced")["changed"] is True
    sec = spoke_api.get(f"/api/v1/namespaces/{agent_ns}/secrets/bootstrap-hub-kubeconfig")
    assert sec["data"]["kubeconfig"] == b64("bootstrap-v2")


def test_rbac_forbidden_and_detach(run_playbook, kube_api: KubeApi):
    c = unique("det")
    spoke = {"spoke_host": "https://s:6443", "spoke_api_key": SPOKE_TOKEN}
    run = run_playbook(play(task("viewer", {**hub(kube_api, c, **spoke), "hub_api_key": kube_api.viewer_token},
                                 ignore_errors=True)))
    msg = run.task("viewer")["msg"]
    assert "HTTP 403 forbidden" in msg and 'User "viewer" cannot get resource "managedclusters"' in msg, msg

    assert kube_api.info["controller_manager"], "detach needs kube-controller-manager (scripts/deps/kube.sh)"
    absent = hub(kube_api, c, state="absent", wait_timeout=60)
    run = run_playbook(play(task("import", hub(kube_api, c, **spoke)), task("detach (check)", absent, check_mode=True),
                            task("detach", absent), task("detach again", absent)))
    assert run.rc == 0, run.output
    assert run.task("detach (check)")["changed"] is True
    assert [a["action"] for a in run.task("detach")["actions"]] == ["deleted", "deleted"]
    assert run.task("detach again")["changed"] is False
    assert kube_api.get(f"{MC}/{c}") is None
    assert kube_api.get(f"/api/v1/namespaces/{c}") is None


def test_openshift_group_defaults_reach_both_hub_modules(run_playbook, kube_api: KubeApi):
    """`group/proxshift.openshift.openshift` module_defaults with the hub connection: both modules of the
    group take it (before the group held ocp_manifests and cluster_auth too, which reject hub_*)."""
    c = unique("grp")
    defaults = {"hub_host": kube_api.url, "hub_api_key": kube_api.admin_token, "hub_ca_cert": kube_api.ca_cert}
    pb = json.dumps([{
        "hosts": "localhost", "gather_facts": False,
        "module_defaults": {"group/proxshift.openshift.openshift": defaults},
        "tasks": [
            task("import", {"cluster_name": c, "spoke_host": "https://s:6443", "spoke_api_key": SPOKE_TOKEN,
                            "klusterlet_addon_config": False}),
            {"name": "info", "proxshift.openshift.acm_cluster_info": {"name": c}},
        ],
    }])
    run = run_playbook(pb)
    assert run.rc == 0, run.output
    assert run.task("import")["changed"] is True
    assert [x["name"] for x in run.task("info")["clusters"]] == [c]
    secret = kube_api.get(f"/api/v1/namespaces/{c}/secrets/auto-import-secret")
    assert secret["data"]["autoImportRetry"] == b64("5")
