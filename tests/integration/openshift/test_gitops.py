"""GitOps bootstrap (role proxshift.openshift.gitops) with real ansible-playbook, the real kube-apiserver
(kube_fixtures.py, with the upstream Argo CD Application, OCM ManagedClusterSet(Binding)/Placement and ACM
GitOpsCluster CRDs) and a real OpenBao holding the repository credentials.

No operator runs here. `FakeOlm` (tests/standins/olm.py) plays OLM; `FakeGitOps` (tests/standins/gitops.py) plays, and only by writing
what they write: the OpenShift GitOps operator (the Argo CD server Deployment, Available), Argo CD's
application controller (the Application's sync and health status, with its resources) and the hub's GitOps
addon (the GitOpsCluster's status.phase). The same API server stands for the cluster and for the hub.
"""
from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from standins.gitops import FakeGitOps
from standins.olm import FakeOlm
from kube_fixtures import KubeApi, condition, kube_api, spoke_api, unique, wait_until  # noqa: F401 (fixtures)
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
    names = {"ns": unique("gitops"), "op_ns": unique("gitops-op"), "hub_ns": unique("hub-gitops"), "set": unique("set"),
             "cluster": unique("c")}
    kube_api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": names["hub_ns"]}})
    # The cluster as the ACM import left it on the hub: a ManagedCluster in the set (acm_import's clusterset label).
    kube_api.ok("POST", f"{OCM}/v1/managedclusters", {
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": names["cluster"], "labels": {"cluster.open-cluster-management.io/clusterset": names["set"]}},
        "spec": {"hubAcceptsClient": True}})
    cred = f"gitops/{names['ns']}/repo"
    openbao.kv_put(cred, {"username": "git", "password": REPO_CANARY_PASSWORD})
    role_vars = {"gitops_cluster": names["cluster"], "gitops_namespace": names["ns"], "gitops_operator_namespace": names["op_ns"],
                 "gitops_repo_url": "https://git.example.com/platform/clusters.git", "gitops_repo_path": "clusters/c1",
                 "gitops_repo_revision": "main", "gitops_repo_credentials_vault_path": cred,
                 "gitops_hub": True, "gitops_hub_clusterset": names["set"], "gitops_hub_namespace": names["hub_ns"]}
    return kubeconfig, names, role_vars


def test_bootstrap_check_mode_hub_registration_and_rerun(run_playbook, kube_api: KubeApi, openbao: OpenBao, setup):
    kubeconfig, n, role_vars = setup
    pb = play(kubeconfig, openbao, **role_vars)
    with FakeOlm(kube_api, n["op_ns"]), FakeGitOps(kube_api, n["ns"], n["hub_ns"], n["op_ns"]):
        since = len(kube_api.audit_events())
        run = run_playbook(pb, check=True, diff=True)
        assert run.rc == 0, run.output
        assert kube_api.get(f"{APPS}/{n['ns']}/applications/root") is None, "check mode must not create"
        assert kube_api.get(f"{OCM}/v1beta1/namespaces/{n['hub_ns']}/placements/{n['set']}-gitops") is None
        # The GitOps namespace comes with the operator, which check mode does not install: predicted.
        installed_by = "OpenShift GitOps (operator openshift-gitops-operator)"
        r = next(r["result"] for r in run.results if r["task"].startswith(f"{ROLE} : Apply the repository credentials"))
        assert r["results"][0]["note"] == f"would create (namespace {n['ns']} not there yet: created by {installed_by})", r
        time.sleep(0.5)
        writes = [e for e in kube_api.audit_events()[since:] if e["user"]["username"] == "kc-admin"
                  and e["verb"] in ("create", "update", "patch", "delete") and "dryRun=All" not in e["requestURI"]]
        assert writes == [], writes

        run = run_playbook(pb, diff=True)
        assert run.rc == 0, run.output
        # One owner per cluster path: the hub's ApplicationSet deploys it, so the cluster's Argo CD gets no root
        # Application; the hub's Application for this cluster is the one waited for.
        assert kube_api.get(f"{APPS}/{n['ns']}/applications/root") is None
        app = kube_api.get(f"{APPS}/{n['hub_ns']}/applications/{n['cluster']}-root")
        assert app["spec"]["source"] == {"repoURL": "https://git.example.com/platform/clusters.git",
                                         "path": "clusters/c1", "targetRevision": "main"}
        assert app["spec"]["syncPolicy"] == {
            "automated": {"prune": True, "selfHeal": True},
            "retry": {"limit": 10, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "3m"}},
            "syncOptions": ["CreateNamespace=true", "SkipDryRunOnMissingResource=true", "ServerSideApply=true"]}
        # Synced after one failed attempt, by Argo CD's retry.
        assert app["status"]["operationState"]["retryCount"] == 1 and app["status"]["sync"]["status"] == "Synced"
        for where in (f"{n['ns']}/secrets/root-repository", f"{n['hub_ns']}/secrets/{n['set']}-gitops-repository"):
            secret = kube_api.get(f"/api/v1/namespaces/{where}")
            assert secret["metadata"]["labels"] == {"argocd.argoproj.io/secret-type": "repository"}, where
            assert base64.b64decode(secret["data"]["password"]).decode() == REPO_CANARY_PASSWORD, where
        assert REPO_CANARY_PASSWORD not in run.output
        binding = kube_api.get(f"{OCM}/v1beta2/namespaces/{n['hub_ns']}/managedclustersetbindings/{n['set']}")
        assert binding["spec"] == {"clusterSet": n["set"]}
        placement = kube_api.get(f"{OCM}/v1beta1/namespaces/{n['hub_ns']}/placements/{n['set']}-gitops")
        assert placement["spec"]["clusterSets"] == [n["set"]]
        # The hub's ApplicationSet deploys to the Placement's clusters, this one among them.
        appset = kube_api.get(f"{APPS}/{n['hub_ns']}/applicationsets/{n['set']}-gitops")
        gen = appset["spec"]["generators"][0]["clusterDecisionResource"]
        assert gen["configMapRef"] == "acm-placement" and gen["labelSelector"]["matchLabels"] == {
            "cluster.open-cluster-management.io/placement": f"{n['set']}-gitops"}, gen
        assert appset["spec"]["template"]["metadata"]["name"] == "{{name}}-root"
        assert appset["spec"]["template"]["spec"]["destination"]["server"] == "{{server}}"
        decision = kube_api.get(f"{OCM}/v1beta1/namespaces/{n['hub_ns']}/placementdecisions/{n['set']}-gitops-decision-1")
        assert {"clusterName": n["cluster"], "reason": ""} in decision["status"]["decisions"], decision
        wait = run.task(f"{ROLE} : Wait for the Placement's decision and the hub's Argo CD cluster secret of {n['cluster']}")
        assert wait["attempts"] >= 1
        wait = run.task(f"{ROLE} : Wait for the hub's Application of the cluster to be Synced and Healthy, {n['cluster']}-root")
        assert wait["attempts"] >= 1, wait

        run = run_playbook(pb)
        assert run.rc == 0, run.output
        assert run.changed_tasks() == [], run.changed_tasks()


def test_an_application_never_healthy_fails_naming_the_failing_resources(run_playbook, kube_api: KubeApi,
                                                                          openbao: OpenBao, setup):
    kubeconfig, n, role_vars = setup
    pb = play(kubeconfig, openbao, **{**role_vars, "gitops_hub": False, "gitops_app_timeout": 3})
    with FakeOlm(kube_api, n["op_ns"]), FakeGitOps(kube_api, n["ns"], n["hub_ns"], n["op_ns"], healthy=False):
        run = run_playbook(pb)
    assert run.rc != 0
    msg = run.task(f"{ROLE} : Check that the root Application is Synced and Healthy")["msg"]
    assert msg.startswith(f"Application {n['ns']}/root (https://git.example.com/platform/clusters.git clusters/c1 at main) "
                          "is OutOfSync and Degraded after 3s."), msg
    assert ('Failing resources: Deployment team-a/web: OutOfSync, Degraded (Deployment "web" exceeded its progress '
            'deadline).') in msg, msg
    assert "Last sync: Failed one or more objects failed to apply." in msg, msg


def test_without_retry_the_first_failed_sync_is_final(run_playbook, kube_api: KubeApi, openbao: OpenBao, setup):
    """Argo CD does not retry a failed automated sync of the same revision unless syncPolicy.retry says so."""
    kubeconfig, n, role_vars = setup
    pb = play(kubeconfig, openbao, **{**role_vars, "gitops_hub": False, "gitops_app_timeout": 3, "gitops_app_sync_retry": {}})
    with FakeOlm(kube_api, n["op_ns"]), FakeGitOps(kube_api, n["ns"], n["hub_ns"], n["op_ns"]):
        run = run_playbook(pb)
    assert run.rc != 0
    msg = run.task(f"{ROLE} : Check that the root Application is Synced and Healthy")["msg"]
    assert "is OutOfSync and Missing after 3s." in msg and "Last sync: Failed one or more synchronization tasks" in msg, msg
    assert "retry" not in kube_api.get(f"{APPS}/{n['ns']}/applications/root")["spec"]["syncPolicy"]


def test_repository_credentials_missing_fail_first_ssh_and_token_work(run_playbook, kube_api: KubeApi,
                                                                      openbao: OpenBao, setup):
    kubeconfig, n, role_vars = setup
    base = {**role_vars, "gitops_hub": False}
    missing = f"gitops/{n['ns']}/nothing-here"
    with FakeOlm(kube_api, n["op_ns"]), FakeGitOps(kube_api, n["ns"], n["hub_ns"], n["op_ns"]):
        # Checked before anything else, so already by a check run on a cluster not installed yet (no kubeconfig).
        run = run_playbook(play(kubeconfig.parent / "not-installed", openbao,
                                **{**base, "gitops_repo_credentials_vault_path": missing}), check=True)
        assert run.rc != 0
        msg = run.task(f"{ROLE} : Check the repository credentials in Vault")["msg"]
        assert msg.startswith(f"No repository credentials in Vault at secret/{missing} (gitops_repo_credentials_vault_path)"), msg
        assert kube_api.get(f"/api/v1/namespaces/{n['ns']}/secrets/root-repository") is None
        assert kube_api.get(f"{APPS}/{n['ns']}/applications/root") is None

        # An SSH URL with a key, and the application controller granted a cluster role (off by default).
        ssh = f"gitops/{n['ns']}/ssh"
        openbao.kv_put(ssh, {"ssh_private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nrepo-key-canary-51\n"})
        run = run_playbook(play(kubeconfig, openbao, **{
            **base, "gitops_repo_url": "git@git.example.com:platform/clusters.git", "gitops_repo_credentials_vault_path": ssh,
            "gitops_app_controller_cluster_role": "cluster-admin"}))
        assert run.rc == 0, run.output
        data = kube_api.get(f"/api/v1/namespaces/{n['ns']}/secrets/root-repository")["data"]
        assert sorted(data) == ["sshPrivateKey", "type", "url"], data
        assert "repo-key-canary-51" in base64.b64decode(data["sshPrivateKey"]).decode()
        crb = kube_api.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"
                           f"{n['ns']}-argocd-application-controller-cluster-admin")
        assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "openshift-gitops-argocd-application-controller",
                                    "namespace": n["ns"]}], crb

        # An HTTPS token: any username goes with it.
        token = f"gitops/{n['ns']}/token"
        openbao.kv_put(token, {"token": REPO_CANARY_PASSWORD})
        run = run_playbook(play(kubeconfig, openbao, **{**base, "gitops_repo_credentials_vault_path": token}))
        assert run.rc == 0, run.output
        data = kube_api.get(f"/api/v1/namespaces/{n['ns']}/secrets/root-repository")["data"]
        assert base64.b64decode(data["username"]) == b"git" and "sshPrivateKey" not in data, data
        assert base64.b64decode(data["password"]).decode() == REPO_CANARY_PASSWORD
        assert REPO_CANARY_PASSWORD not in run.output and "repo-key-canary-51" not in run.output


def test_a_cluster_in_another_set_than_the_acm_import_fails_before_the_hub_is_touched(
        run_playbook, kube_api: KubeApi, openbao: OpenBao, setup):
    kubeconfig, n, role_vars = setup
    other = unique("other-set")
    pb = play(kubeconfig, openbao, **{**role_vars, "gitops_repo_url": "", "gitops_hub_clusterset": other})
    with FakeOlm(kube_api, n["op_ns"]), FakeGitOps(kube_api, n["ns"], n["hub_ns"], n["op_ns"]):
        # Check mode predicts it: the cluster is on the hub, in another set.
        check = run_playbook(pb, check=True)
        run = run_playbook(pb)
    for r in (check, run):
        assert r.rc != 0, r.output
        msg = r.task(f"{ROLE} : Check that the cluster is in the set the hub's Argo CD gets")["msg"]
        assert msg.startswith(f"ManagedCluster {n['cluster']} is in the ManagedClusterSet '{n['set']}'") and \
            f"not in gitops_hub_clusterset '{other}'" in msg, msg
    assert kube_api.get(f"{OCM}/v1beta1/namespaces/{n['hub_ns']}/placements/{other}-gitops") is None


def test_two_clusters_on_one_hub_each_keep_their_own_path(run_playbook, kube_api: KubeApi, spoke_api: KubeApi,
                                                         openbao: OpenBao, setup):
    """Two clusters of one set on one hub: c1 (clusters/c1, a cluster of its own: a second API server, the hub the
    first) registered, then c2 (clusters/c2, registered later, its hub part alone: its cluster is not installed here). The set's one ApplicationSet templates the path per decided
    cluster, so the hub's Argo CD deploys clusters/c1 to c1 and clusters/c2 to c2 — before, c2's run rewrote the
    ApplicationSet's path to clusters/c2 and, with prune, synced c1 to it. The GitOps addon reconciles continuously:
    c2, decided after the GitOpsCluster succeeded for c1, gets its cluster secret too."""
    kubeconfig, n, role_vars = setup
    c1, c2 = n["cluster"], unique("c")
    kube_api.ok("POST", f"{OCM}/v1/managedclusters", {
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": c2, "labels": {"cluster.open-cluster-management.io/clusterset": n["set"]}},
        "spec": {"hubAcceptsClient": True}})
    c1_kubeconfig = kubeconfig.parent / "c1.kubeconfig"
    c1_kubeconfig.write_text(spoke_api.kubeconfig(spoke_api.kubeconfig_token))
    first = play(c1_kubeconfig, openbao, **{**role_vars, "gitops_repo_path": f"clusters/{c1}",
                                            "gitops_hub_kubeconfig": str(kubeconfig)})
    second = play(kubeconfig.parent / "c2-not-installed-here", openbao,
                  **{**role_vars, "gitops_cluster": c2, "gitops_repo_path": f"clusters/{c2}",
                     "gitops_hub_kubeconfig": str(kubeconfig)})
    # A private repository: the hub's Argo CD reads it only with the hub's own repository Secret (the role waits for
    # each cluster's hub Application to be Synced and Healthy, which it never is without).
    with FakeOlm(spoke_api, n["op_ns"]), \
            FakeGitOps(spoke_api, n["ns"], n["hub_ns"], n["op_ns"], hub_api=kube_api, private=True):
        for pb in (first, second):
            run = run_playbook(pb)
            assert run.rc == 0, run.output
        appset = kube_api.get(f"{APPS}/{n['hub_ns']}/applicationsets/{n['set']}-gitops")
        assert appset["spec"]["template"]["spec"]["source"]["path"] == "clusters/{{name}}", appset["spec"]

        def paths() -> dict:
            return {c: (kube_api.get(f"{APPS}/{n['hub_ns']}/applications/{c}-root") or {}).get("spec", {})
                    .get("source", {}).get("path") for c in (c1, c2)}
        want = {c1: f"clusters/{c1}", c2: f"clusters/{c2}"}
        wait_until(lambda: paths() == want, 30, lambda: f"the hub's Applications' paths: {paths()}, not {want}")
        for c in (c1, c2):
            assert kube_api.get(f"/api/v1/namespaces/{n['hub_ns']}/secrets/{c}-application-manager-cluster-secret")
            app = kube_api.get(f"{APPS}/{n['hub_ns']}/applications/{c}-root")
            assert (app["status"]["sync"]["status"], app["status"]["health"]["status"]) == ("Synced", "Healthy"), app["status"]
        # The hub owns both paths: c1's own Argo CD has no root Application deploying clusters/c1 as well.
        assert spoke_api.get(f"{APPS}/{n['ns']}/applications/root") is None
        assert spoke_api.get(f"/api/v1/namespaces/{n['ns']}") is not None, "c1's GitOps operator is on c1"


def test_a_root_application_on_the_path_the_hub_takes_over_fails_before_the_hub_is_touched(
        run_playbook, kube_api: KubeApi, openbao: OpenBao, setup):
    """A cluster bootstrapped without the hub's ApplicationSet (its own Argo CD owns the path through the root
    Application), then registered with it: two Argo CD instances would prune and self-heal the same objects, so the
    run fails naming the root Application, and the hub gets no ApplicationSet."""
    kubeconfig, n, role_vars = setup
    with FakeOlm(kube_api, n["op_ns"]), FakeGitOps(kube_api, n["ns"], n["hub_ns"], n["op_ns"]):
        run = run_playbook(play(kubeconfig, openbao, **{**role_vars, "gitops_hub_appset": False}))
        assert run.rc == 0, run.output
        assert kube_api.get(f"{APPS}/{n['ns']}/applications/root")["spec"]["source"]["path"] == "clusters/c1"
        run = run_playbook(play(kubeconfig, openbao, **role_vars))
    assert run.rc != 0
    msg = run.task(f"{ROLE} : Check that only the hub's Argo CD deploys the cluster's path, clusters/c1")["msg"]
    assert msg.startswith(f"Application {n['ns']}/root on {n['cluster']} deploys https://git.example.com/platform/clusters.git "
                          f"clusters/c1, which the hub's ApplicationSet {n['hub_ns']}/{n['set']}-gitops deploys"), msg
    assert kube_api.get(f"{APPS}/{n['hub_ns']}/applicationsets/{n['set']}-gitops") is None


def test_the_hub_application_of_a_private_repository_without_credentials_fails_naming_why(
        run_playbook, kube_api: KubeApi, openbao: OpenBao, setup):
    """The hub's Argo CD owns the path: its Application for the cluster is waited for, not only the Placement's
    decision. A private repository without credentials never syncs there (Argo CD's ComparisonError), and the role
    says so, with the Application's condition."""
    kubeconfig, n, role_vars = setup
    pb = play(kubeconfig, openbao, **{**role_vars, "gitops_repo_credentials_vault_path": "", "gitops_app_timeout": 3})
    with FakeOlm(kube_api, n["op_ns"]), FakeGitOps(kube_api, n["ns"], n["hub_ns"], n["op_ns"], private=True):
        run = run_playbook(pb)
    assert run.rc != 0
    msg = run.task(f"{ROLE} : Check that the hub's Application of the cluster is Synced and Healthy, {n['cluster']}-root")["msg"]
    assert msg.startswith(f"Application {n['hub_ns']}/{n['cluster']}-root of the hub's Argo CD "
                          "(https://git.example.com/platform/clusters.git clusters/c1 at main) is Unknown and Healthy after 3s."), msg
    assert "Conditions: Failed to load target state" in msg and "authentication required" in msg, msg
    assert kube_api.get(f"/api/v1/namespaces/{n['hub_ns']}/secrets/{n['set']}-gitops-repository") is None
