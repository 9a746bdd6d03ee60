"""The proxshift.openshift.post_install role through real ansible-playbook against the real kube-apiserver
(kube_fixtures.py): node labels and taints merged into Nodes the test creates, StorageClasses created and
exactly one default, a rerun that changes nothing, and a node the cluster lacks."""
from __future__ import annotations

import json

from kube_fixtures import KubeApi, kube_api, unique  # noqa: F401 (fixtures)
from standins.controller import FakeController

GA = "storageclass.kubernetes.io/is-default-class"
SC = "/apis/storage.k8s.io/v1/storageclasses"
ROLE = "proxshift.openshift.post_install"


def play(**role_vars) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "post", "ansible.builtin.import_role": {"name": "proxshift.openshift.post_install"},
         "vars": role_vars}]}])


def node(name: str, labels: dict, taints: list) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}


def not_the_controllers(taints: list | None) -> list:
    """The taints without the node lifecycle controller's (`node.kubernetes.io/not-ready`, `.../unreachable`): it
    adds and removes them on its own schedule (kube-controller-manager's taint-by-condition pass), at any moment of
    the test."""
    return [t for t in taints or [] if not t["key"].startswith("node.kubernetes.io/")]


def storage_class(name: str, default: bool | None = None) -> dict:
    meta = {"name": name}
    if default is not None:
        meta["annotations"] = {GA: "true" if default else "false"}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta,
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}


def test_labels_taints_and_the_default_storage_class_converge(run_playbook, kube_api: KubeApi, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kube_api.kubeconfig(kube_api.kubeconfig_token))
    infra, worker = unique("infra"), unique("worker")
    kube_api.ok("POST", "/api/v1/nodes", node(infra, {"kept": "yes"}, [
        {"key": "theirs", "value": "x", "effect": "NoSchedule"},
        {"key": "node-role.kubernetes.io/infra", "value": "old", "effect": "NoSchedule"}]))
    kube_api.ok("POST", "/api/v1/nodes", node(worker, {"kept": "too"}, []))
    # The API server's TaintNodesByCondition admission adds node.kubernetes.io/not-ready to a new Node, and the
    # node lifecycle controller later removes it or adds unreachable ones: taints that are not the inventory's.
    taints_before = not_the_controllers(kube_api.get(f"/api/v1/nodes/{infra}")["spec"]["taints"])
    assert {"key": "theirs", "value": "x", "effect": "NoSchedule"} in taints_before
    old, plain, fast = unique("old-default"), unique("plain"), unique("fast")
    kube_api.ok("POST", SC, storage_class(old, default=True))
    kube_api.ok("POST", SC, storage_class(plain))
    role_vars = {
        "post_install_kubeconfig": str(kubeconfig),
        "post_install_nodes": [
            {"name": infra, "labels": {"node-role.kubernetes.io/infra": ""},
             "taints": [{"key": "node-role.kubernetes.io/infra", "value": "reserved", "effect": "NoSchedule"}]},
            {"name": worker, "labels": {"cluster.ocs.openshift.io/openshift-storage": ""}, "taints": []},
        ],
        "post_install_storage_classes": [{"name": fast, "provisioner": "kubernetes.io/no-provisioner",
                                          "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"}],
        "post_install_default_storage_class": fast,
    }
    run = run_playbook(play(**role_vars), check=True, diff=True)
    assert run.rc == 0, run.output
    assert kube_api.get(f"{SC}/{fast}") is None, "check mode must not create"
    assert kube_api.get(f"/api/v1/nodes/{infra}")["metadata"]["labels"] == {"kept": "yes"}

    run = run_playbook(play(**role_vars))
    assert run.rc == 0, run.output
    assert set(run.changed_tasks()) == {f"{ROLE} : Apply the nodes' labels and taints (attempt 1)",
                                        f"{ROLE} : Converge the StorageClasses and the default one"}
    i = kube_api.get(f"/api/v1/nodes/{infra}")
    assert i["metadata"]["labels"] == {"kept": "yes", "node-role.kubernetes.io/infra": ""}
    # Same order, the inventory's taint updated in place, every other taint kept.
    assert not_the_controllers(i["spec"]["taints"]) == [
        {**t, "value": "reserved"} if t["key"] == "node-role.kubernetes.io/infra" else t for t in taints_before]
    w = kube_api.get(f"/api/v1/nodes/{worker}")
    assert w["metadata"]["labels"] == {"kept": "too", "cluster.ocs.openshift.io/openshift-storage": ""}
    assert not_the_controllers(w["spec"].get("taints")) == []
    assert kube_api.get(f"{SC}/{fast}")["metadata"]["annotations"][GA] == "true"
    assert kube_api.get(f"{SC}/{old}")["metadata"]["annotations"][GA] == "false"
    assert "annotations" not in kube_api.get(f"{SC}/{plain}")["metadata"]
    defaults = [c["metadata"]["name"] for c in kube_api.get(SC)["items"]
                if c["metadata"].get("annotations", {}).get(GA) == "true"]
    assert defaults == [fast], defaults

    run = run_playbook(play(**role_vars))
    assert run.rc == 0, run.output
    assert run.changed_tasks() == [], run.changed_tasks()

    # The default moves back to an existing class; the inventory's class loses it.
    run = run_playbook(play(**{**role_vars, "post_install_default_storage_class": old}))
    assert run.rc == 0, run.output
    assert kube_api.get(f"{SC}/{old}")["metadata"]["annotations"][GA] == "true"
    assert kube_api.get(f"{SC}/{fast}")["metadata"]["annotations"][GA] == "false"


def test_nothing_configured_is_a_no_op_and_a_missing_node_fails(run_playbook, kube_api: KubeApi, tmp_path):
    run = run_playbook(play(post_install_kubeconfig=str(tmp_path / "absent")))
    assert run.rc == 0, run.output
    assert run.changed_tasks() == []
    assert "nothing to do" in run.output

    # Configured, but the install has produced no kubeconfig yet: said, nothing changed (as cluster_ready).
    run = run_playbook(play(post_install_kubeconfig=str(tmp_path / "absent"), post_install_default_storage_class="x"))
    assert run.rc == 0, run.output
    assert run.changed_tasks() == [] and "the post-install configuration is not applied" in run.output, run.output

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kube_api.kubeconfig(kube_api.kubeconfig_token))
    ghost = unique("ghost")
    run = run_playbook(play(post_install_kubeconfig=str(kubeconfig),
                            post_install_nodes=[{"name": ghost, "labels": {"a": "b"}}]))
    assert run.rc != 0
    assert f"sets labels or taints on {ghost}" in run.output, run.output
    assert kube_api.get(f"/api/v1/nodes/{ghost}") is None

    run = run_playbook(play(post_install_kubeconfig=str(kubeconfig), post_install_default_storage_class=unique("nope")))
    assert run.rc != 0 and "has no such StorageClass" in run.output, run.output


class TaintsBetween(FakeController):
    """Another writer (the node lifecycle controller, the machine-config daemon) adding a taint to `node` right
    after the role's modules (`kc-admin`) read it, before they apply: the taint list the role merged is stale."""

    def __init__(self, api: KubeApi, node: str):
        self.api, self.node, self.done = api, node, False
        self.since = len(api.audit_events())
        super().__init__()

    def tick(self):
        if self.done:
            return
        read = [e for e in self.api.audit_events()[self.since:] if e["user"]["username"] == "kc-admin"
                and e["verb"] == "get" and e["requestURI"].split("?")[0] == f"/api/v1/nodes/{self.node}"]
        if read:
            taints = self.api.get(f"/api/v1/nodes/{self.node}")["spec"].get("taints", [])
            self.api.ok("PATCH", f"/api/v1/nodes/{self.node}",
                        {"spec": {"taints": taints + [{"key": "other-writer", "effect": "PreferNoSchedule"}]}},
                        content_type="application/merge-patch+json")
            self.done = True


def test_a_taint_added_between_read_and_apply_is_kept(run_playbook, kube_api: KubeApi, tmp_path):
    """The taints are applied over the resourceVersion they were merged from: the other writer's change makes
    the apply a 409 Conflict, and the role reads, merges and applies again, keeping that taint."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kube_api.kubeconfig(kube_api.kubeconfig_token))
    n = unique("tainted")
    kube_api.ok("POST", "/api/v1/nodes", node(n, {}, []))
    mine = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
    with TaintsBetween(kube_api, n) as other:
        run = run_playbook(play(post_install_kubeconfig=str(kubeconfig), post_install_nodes=[{"name": n, "taints": [mine]}]))
    assert run.rc == 0, run.output
    assert other.done
    taints = kube_api.get(f"/api/v1/nodes/{n}")["spec"]["taints"]
    assert mine in taints and {"key": "other-writer", "effect": "PreferNoSchedule"} in taints, taints
    conflicts = [e for e in kube_api.audit_events() if e["user"]["username"] == "kc-admin" and e["verb"] == "patch"
                 and e["requestURI"].startswith(f"/api/v1/nodes/{n}") and e["responseStatus"]["code"] == 409]
    assert conflicts, "the first apply must have met the other writer's change"
    assert run.task(f"{ROLE} : Apply the nodes' labels and taints (attempt 2)")["changed"] is True
