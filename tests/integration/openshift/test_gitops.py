"""GitOps bootstrap (role proxshift.openshift.gitops) with real ansible-playbook, the real kube-apiserver
(kube_fixtures.py, with the upstream Argo CD Application, OCM ManagedClusterSet(Binding)/Placement and ACM
GitOpsCluster CRDs) and a real OpenBao holding the repository credentials.

No operator runs here. `FakeOlm` (tests/standins/olm.py) plays OLM; `FakeGitOps` (tests/standins/gitops.py) plays, and only by writing
what they write: the OpenShift GitOps operator (the Argo CD server Deployment, Available), Argo CD's
application controller (the Application's sync and health status, with its resources) and the hub's GitOps
addon (the GitOpsCluster's status.phase). The same API server stands for the cluster and for the hub.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from standins.gitops import FakeGitOps
from standins.olm import FakeOlm
from kube_fixtures import KubeApi, condition, kube_api, unique  # noqa: F401 (fixtures)
from services import OpenBao

ROLE = "proxshift.openshift.gitops"
APPS = "/apis/argoproj.io/v1alpha1/namespaces"
OCM = "/apis/cluster.open-cluster-management.io"
REPO_CANARY_PASSWORD = "canary-repo-password-7"


def play(kubeconfig: Path, bao: OpenBao, **role_vars) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False,
                        "module_defaults": {"group/proxshift.hashi_vault.vault": {"url": bao.addr, "token": bao.token}},
                        "tasks": [{"name": "gitops", "ansible.builtin.import_role": {"name": ROLE},
                                   "vars": {"gitops_kubeconfig": str(kubeconfig), "gitops_hub_kubeconfig": str(kubeconfig),
                                            "gitops_operator_timeout": 30, "gitops_operator_interval": 1,
                                            "gitops_app_timeout": 20, "gitops_app_interval": 1, "gitops_hub_timeout": 30,
                                            **role_vars}}]}])


@pytest.fixture
def setup(kube_api: KubeApi, openbao: OpenBao, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kube_api.kubeconfig(kube_api.kubeconfig_token))
    names = {"ns": unique("gitops"), "op_ns": unique("gitops-op"), "hub_ns": unique("hub-gitops"), "set": unique("set")}
    kube_api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": names["hub_ns"]}})
    cred = f"gitops/{names['ns']}/repo"
    openbao.kv_put(cred, {"username": "git", "password": REPO_CANARY_PASSWORD})
    role_vars = {"gitops_cluster": "c1", "gitops_namespace": names["ns"], "gitops_operator_namespace": names["op_ns"],
                 "gitops_repo_url": "https://git.example.com/platform/clusters.git", "gitops_repo_path": "clusters/c1",
                 "gitops_repo_revision": "main", "gitops_repo_credentials_vault_path": cred,
                 "gitops_hub": True, "gitops_hub_clusterset": names["set"], "gitops_hub_namespace": names["hub_ns"]}
    return kubeconfig, names, role_vars


def test_bootstrap_check_mode_hub_registration_and_rerun(run_playbook, kube_api: KubeApi, openbao: OpenBao, setup):
    kubeconfig, n, role_vars = setup
    pb = play(kubeconfig, openbao, **role_vars)
    with FakeOlm(kube_api, n["op_ns"]), FakeGitOps(kube_api, n["ns"], n["hub_ns"]):
        run = run_playbook(pb, check=True, diff=True)
        assert run.rc == 0, run.output
        assert kube_api.get(f"{APPS}/{n['ns']}/applications/root") is None, "check mode must not create"
        assert kube_api.get(f"{OCM}/v1beta1/namespaces/{n['hub_ns']}/placements/{n['set']}-gitops") is None

        run = run_playbook(pb, diff=True)
        assert run.rc == 0, run.output
        app = kube_api.get(f"{APPS}/{n['ns']}/applications/root")
        assert app["spec"]["source"] == {"repoURL": "https://git.example.com/platform/clusters.git",
                                         "path": "clusters/c1", "targetRevision": "main"}
        assert app["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
        secret = kube_api.get(f"/api/v1/namespaces/{n['ns']}/secrets/root-repository")
        assert secret["metadata"]["labels"] == {"argocd.argoproj.io/secret-type": "repository"}
        assert REPO_CANARY_PASSWORD not in run.output
        binding = kube_api.get(f"{OCM}/v1beta2/namespaces/{n['hub_ns']}/managedclustersetbindings/{n['set']}")
        assert binding["spec"] == {"clusterSet": n["set"]}
        placement = kube_api.get(f"{OCM}/v1beta1/namespaces/{n['hub_ns']}/placements/{n['set']}-gitops")
        assert placement["spec"]["clusterSets"] == [n["set"]]

        run = run_playbook(pb)
        assert run.rc == 0, run.output
        assert run.changed_tasks() == [], run.changed_tasks()


def test_an_application_never_healthy_fails_naming_the_failing_resources(run_playbook, kube_api: KubeApi,
                                                                          openbao: OpenBao, setup):
    kubeconfig, n, role_vars = setup
    pb = play(kubeconfig, openbao, **{**role_vars, "gitops_hub": False, "gitops_app_timeout": 3})
    with FakeOlm(kube_api, n["op_ns"]), FakeGitOps(kube_api, n["ns"], n["hub_ns"], healthy=False):
        run = run_playbook(pb)
    assert run.rc != 0
    msg = run.task(f"{ROLE} : Check that the root Application is Synced and Healthy")["msg"]
    assert msg.startswith(f"Application {n['ns']}/root (https://git.example.com/platform/clusters.git clusters/c1 at main) "
                          "is OutOfSync and Degraded after 3s."), msg
    assert ('Failing resources: Deployment team-a/web: OutOfSync, Degraded (Deployment "web" exceeded its progress '
            'deadline).') in msg, msg
    assert "Last sync: Failed one or more objects failed to apply." in msg, msg
