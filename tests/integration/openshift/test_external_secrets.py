"""External Secrets wired to Vault (role proxshift.openshift.external_secrets) with real ansible-playbook, the
real kube-apiserver (kube_fixtures.py), a real OpenBao and the real External Secrets controller
(github.com/external-secrets/external-secrets, built from Go modules by scripts/deps/kube.sh).

Only OLM and the operator are played (`FakeOlm`, tests/standins/olm.py: it installs the package's CRDs and marks the
operator's CSV Succeeded, as OLM would; `FakeEsoOperator`, tests/standins/eso.py: from the ExternalSecretsConfig the
role applied it deploys the operand's Deployments, as Red Hat's operator would). The controller does the rest itself, as on a cluster: for the ClusterSecretStore the role applied it requests a
token for the store's service account (TokenRequest), logs in to OpenBao at the store's auth mount and role
(OpenBao checks that token with a real TokenReview against the kube-apiserver, over TLS with the CA the role
took from the kubeconfig) and sets `Ready`; for an ExternalSecret in an application namespace it reads the
cluster's Vault path and writes the Secret. Another cluster's path stays unreadable through the store, and so does the
cluster's own path from a namespace outside the store's conditions.
"""
from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from standins.eso import ESC, REDHAT_OPERAND_NS, FakeEsoOperator
from standins.olm import FakeOlm
from kube_fixtures import (KubeApi, _running_testenv, event_message, external_secret, external_secrets_controller,  # noqa: F401 (fixtures)
                           kube_api, ready_condition, unique)
from services import OpenBao

ROLE = "proxshift.openshift.external_secrets"
STORES = "/apis/external-secrets.io/v1/clustersecretstores"


def sa_token(api: KubeApi, ns: str, sa: str) -> str:
    """A short-lived token of `sa`, as ESO requests one (TokenRequest API)."""
    tr = api.ok("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}})
    return tr["status"]["token"]


def vault_login(bao: OpenBao, api: KubeApi, store: dict) -> tuple[int, dict]:
    k = store["spec"]["provider"]["vault"]["auth"]["kubernetes"]
    jwt = sa_token(api, k["serviceAccountRef"]["namespace"], k["serviceAccountRef"]["name"])
    return bao.api("POST", f"auth/{k['mountPath']}/login", {"role": k["role"], "jwt": jwt}, token="")


def play(kubeconfig: Path, bao: OpenBao, token: str, **role_vars) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False,
                        "module_defaults": {"group/proxshift.hashi_vault.vault": {"url": bao.addr, "token": token}},
                        "tasks": [{"name": "eso", "ansible.builtin.import_role": {"name": ROLE},
                                   "vars": {"external_secrets_kubeconfig": str(kubeconfig),
                                            "external_secrets_vault_url": bao.addr,
                                            "external_secrets_operator_timeout": 30,
                                            "external_secrets_operator_interval": 1,
                                            "external_secrets_store_timeout": 30, **role_vars}}]}])


def test_eso_reads_its_own_cluster_only_check_mode_and_rerun(run_playbook, kube_api: KubeApi, openbao: OpenBao, tmp_path):
    """The store first as every namespace may use it (`external_secrets_all_namespaces`, as stores were before they
    had conditions), then converged to the namespaces named: the real controller syncs an ExternalSecret there and
    refuses one elsewhere. No namespace named is refused before anything is changed."""
    cluster, ns, op_ns, store = unique("eso"), REDHAT_OPERAND_NS, unique("eso-op"), unique("vault")
    app_ns, denied_ns = unique("eso-app"), unique("eso-denied")
    sa = unique("eso-reader")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kube_api.kubeconfig(kube_api.kubeconfig_token))
    openbao.kv_put(f"clusters/{cluster}/app", {"password": "canary-own-cluster"})
    openbao.kv_put("clusters/another/app", {"password": "canary-other-cluster"})
    role_vars = dict(external_secrets_cluster=cluster, external_secrets_namespace=ns, external_secrets_service_account=sa,
                     external_secrets_store_name=store, external_secrets_operator_namespace=op_ns)
    pb = play(kubeconfig, openbao, openbao.token, external_secrets_all_namespaces=True, **role_vars)
    pb_scoped = play(kubeconfig, openbao, openbao.token, external_secrets_namespaces=[app_ns], **role_vars)

    # No namespace named (the play has no GitOps root Application to take it from): refused, nothing written.
    run = run_playbook(play(kubeconfig, openbao, openbao.token, **role_vars))
    assert run.rc != 0
    failed = [r for r in run.results if r["status"] == "failed"]
    assert [r["task"] for r in failed] == [f"{ROLE} : Check that some namespace may use the store"], failed
    msg = failed[0]["result"]["msg"]
    assert msg.startswith(f"The ClusterSecretStore {store} would be usable from no namespace: external_secrets_namespaces is empty") \
        and "external_secrets_all_namespaces: true" in msg and msg.endswith("Nothing was changed."), msg
    assert kube_api.get(f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}") is None
    # A misspelt selector key, which the API server would drop, leaving a selector of every namespace: refused, and
    # already by a check run on a cluster that is not installed yet (no kubeconfig): the inputs are checked first.
    run = run_playbook(play(tmp_path / "not-installed", openbao, openbao.token,
                            external_secrets_namespace_selector={"matchlabels": {"team": "a"}}, **role_vars), check=True)
    assert run.rc != 0
    msg = run.task(f"{ROLE} : Check the namespace selector of the store")["msg"]
    assert msg.startswith("external_secrets_namespace_selector must be a label selector with matchLabels and/or matchExpressions") \
        and "a selector with other keys" in msg and msg.endswith("Nothing was changed."), msg
    assert kube_api.get(f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}") is None
    # Red Hat's operator runs its operand in external-secrets only: another namespace would be waited for in vain, so
    # a check run refuses it too.
    elsewhere = unique("eso-elsewhere")
    run = run_playbook(play(tmp_path / "not-installed", openbao, openbao.token,
                            **{**role_vars, "external_secrets_namespace": elsewhere}), check=True)
    assert run.rc != 0
    msg = run.task(f"{ROLE} : Check the operand's namespace")["msg"]
    assert msg.startswith(f"external_secrets_namespace is {elsewhere}, but Red Hat's External Secrets Operator") \
        and "always runs its operand in the namespace external-secrets" in msg and msg.endswith("Nothing was changed."), msg
    assert kube_api.get(f"/api/v1/namespaces/{elsewhere}") is None

    with FakeOlm(kube_api, op_ns), FakeEsoOperator(kube_api, op_ns), \
            external_secrets_controller(kube_api, tmp_path) as eso_log:
        run = run_playbook(pb, check=True, diff=True)
        assert run.rc == 0, run.output
        assert kube_api.get(f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}") is None, "check mode must not create"
        assert kube_api.get(f"{STORES}/{store}") is None
        assert openbao.api("GET", f"sys/policies/acl/external-secrets-{cluster}")[0] == 404
        assert f"kubernetes/{cluster}/" not in openbao.api("GET", "sys/auth")[1]["data"]

        run = run_playbook(pb)
        assert run.rc == 0, run.output
        # Red Hat's operator from redhat-operators, its operand configured by the ExternalSecretsConfig `cluster`.
        sub = kube_api.get(f"/apis/operators.coreos.com/v1alpha1/namespaces/{op_ns}/subscriptions/openshift-external-secrets-operator")
        assert (sub["spec"]["channel"], sub["spec"]["source"]) == ("stable-v1", "redhat-operators"), sub["spec"]
        # Red Hat's documented operand config: the core controller may reach Vault (egress allowed).
        assert kube_api.get(f"{ESC}/cluster")["spec"]["controllerConfig"]["networkPolicies"] == [
            {"name": "allow-external-secrets-egress", "componentName": "ExternalSecretsCoreController", "egress": [{}]}]
        live = kube_api.get(f"{STORES}/{store}")
        assert [c["status"] for c in live["status"]["conditions"]] == ["True"], live["status"]
        assert live["spec"]["provider"]["vault"]["auth"]["kubernetes"] == {
            "mountPath": f"kubernetes/{cluster}", "role": "external-secrets",
            "serviceAccountRef": {"name": sa, "namespace": ns}}
        # Nothing on the cluster carries a Vault token: the store names an account, not a secret.
        assert "tokenSecretRef" not in json.dumps(live["spec"])
        assert "conditions" not in live["spec"], live["spec"]

        # An application's ExternalSecret: the real controller reads this cluster's path and writes the Secret.
        external_secret(kube_api, app_ns, "own", store, f"clusters/{cluster}/app")
        assert ready_condition(kube_api, f"/apis/external-secrets.io/v1/namespaces/{app_ns}/externalsecrets/own")[
            "status"] == "True", eso_log.read_text()[-3000:]
        synced = kube_api.get(f"/api/v1/namespaces/{app_ns}/secrets/own")
        assert base64.b64decode(synced["data"]["password"]).decode() == "canary-own-cluster"
        # Another cluster's path through the same store: Vault refuses, no Secret is written.
        external_secret(kube_api, app_ns, "other", store, "clusters/another/app")
        other = ready_condition(kube_api, f"/apis/external-secrets.io/v1/namespaces/{app_ns}/externalsecrets/other")
        assert other["status"] == "False" and other["reason"] == "SecretSyncedError", other
        assert kube_api.get(f"/api/v1/namespaces/{app_ns}/secrets/other") is None

        # The store converged to the namespaces named: --check predicts the store's change and writes nothing,
        # the real run adds the conditions (the store alone changes), the rerun changes nothing.
        store_task = f"{ROLE} : Apply the ClusterSecretStore and wait until ESO calls it Ready, {store}"
        run = run_playbook(pb_scoped, check=True, diff=True)
        assert run.rc == 0, run.output
        assert run.changed_tasks() == [store_task], run.changed_tasks()
        assert "conditions" not in kube_api.get(f"{STORES}/{store}")["spec"]
        run = run_playbook(pb_scoped)
        assert run.rc == 0, run.output
        assert run.changed_tasks() == [store_task], run.changed_tasks()
        live = kube_api.get(f"{STORES}/{store}")
        assert live["spec"]["conditions"] == [{"namespaces": [app_ns]}], live["spec"]
        # The named namespace still reads; another one gets no Secret, and the controller says why.
        external_secret(kube_api, app_ns, "scoped", store, f"clusters/{cluster}/app")
        external_secret(kube_api, denied_ns, "own", store, f"clusters/{cluster}/app")
        assert ready_condition(kube_api, f"/apis/external-secrets.io/v1/namespaces/{app_ns}/externalsecrets/scoped")[
            "status"] == "True", eso_log.read_text()[-3000:]
        denied = ready_condition(kube_api, f"/apis/external-secrets.io/v1/namespaces/{denied_ns}/externalsecrets/own")
        assert (denied["status"], denied["reason"], denied["message"]) == (
            "False", "SecretSyncedError", "could not get secret data from provider"), denied
        why = event_message(kube_api, denied_ns, "own", "denied by spec.condition")
        assert f'using cluster store "{store}" is not allowed from namespace "{denied_ns}"' in why, why
        assert kube_api.get(f"/api/v1/namespaces/{denied_ns}/secrets/own") is None

        run = run_playbook(pb_scoped)
        assert run.rc == 0, run.output
        assert run.changed_tasks() == [], run.changed_tasks()

    # The whole path once more by the test: TokenRequest → login (TokenReview) → reads.
    status, login = vault_login(openbao, kube_api, live)
    assert status == 200, login
    token = login["auth"]["client_token"]
    assert login["auth"]["token_policies"] == ["default", f"external-secrets-{cluster}"]
    status, own = openbao.api("GET", f"secret/data/clusters/{cluster}/app", token=token)
    assert status == 200 and own["data"]["data"] == {"password": "canary-own-cluster"}, status
    assert openbao.api("GET", "secret/data/clusters/another/app", token=token)[0] == 403
    assert openbao.api("POST", f"secret/data/clusters/{cluster}/app", {"data": {"x": "y"}}, token=token)[0] == 403


def test_a_vault_token_that_may_not_create_the_auth_mount_fails_naming_it_and_the_fix_converges(
        run_playbook, kube_api: KubeApi, openbao: OpenBao, tmp_path):
    cluster, ns, store = unique("eso-weak"), REDHAT_OPERAND_NS, unique("vault")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kube_api.kubeconfig(kube_api.kubeconfig_token))
    weak = openbao.token_with_policy(f"weak-{cluster}", 'path "sys/policies/acl/*" { capabilities = ["create", "read", "update"] }\n'
                                                        'path "sys/auth" { capabilities = ["read"] }')
    op_ns = unique("eso-weak-op")
    role_vars = {"external_secrets_cluster": cluster, "external_secrets_namespace": ns, "external_secrets_namespaces": [ns],
                 "external_secrets_operator_namespace": op_ns, "external_secrets_store_name": store}
    pb = play(kubeconfig, openbao, weak, **role_vars)
    with FakeOlm(kube_api, op_ns), FakeEsoOperator(kube_api, op_ns):
        run = run_playbook(pb)
    assert run.rc != 0
    failed = [r for r in run.results if r["status"] == "failed"]
    assert [r["task"] for r in failed] == [f"{ROLE} : Configure the Kubernetes auth mount auth/kubernetes/{cluster}"]
    msg = failed[0]["result"]["msg"]
    assert msg.startswith(f"enabling the kubernetes auth method at auth/kubernetes/{cluster}: "
                          f"POST sys/auth/kubernetes/{cluster}: Vault answered HTTP 403"), msg

    # The fix, a token that may manage auth methods: the rerun converges.
    with FakeOlm(kube_api, op_ns), FakeEsoOperator(kube_api, op_ns), external_secrets_controller(kube_api, tmp_path):
        run = run_playbook(play(kubeconfig, openbao, openbao.token, **role_vars))
    assert run.rc == 0, run.output
    assert openbao.api("GET", f"auth/kubernetes/{cluster}/role/external-secrets")[0] == 200


@pytest.fixture(scope="module")
def fresh_api(tmp_path_factory):
    """A cluster as it comes from the installer: OLM's CRDs, none of External Secrets."""
    yield from _running_testenv(tmp_path_factory, "fresh")


def test_community_bundle_on_a_fresh_cluster_check_mode_then_install(run_playbook, fresh_api: KubeApi,
                                                                     openbao: OpenBao, tmp_path):
    """The community bundle (frozen at 0.11): --check on a cluster without the operator predicts its kinds and
    writes nothing (audit log); the real run creates the OperatorConfig the helm-based operator waits for and
    applies the store at v1beta1, the newest version its CRDs serve. A store that is never Ready fails with
    its own condition message."""
    cluster, ns = unique("eso-com"), unique("eso-com")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(fresh_api.kubeconfig(fresh_api.kubeconfig_token))
    pb = play(kubeconfig, openbao, openbao.token, external_secrets_cluster=cluster, external_secrets_namespace=ns,
              external_secrets_distribution="community", external_secrets_store_name="vault",
              external_secrets_namespace_selector={"matchLabels": {"team": "a"}})
    by = "the External Secrets Operator (external-secrets-operator)"
    with FakeOlm(fresh_api, ns), FakeEsoOperator(fresh_api, ns, bad_stores=("broken",)):
        since = len(fresh_api.audit_events())
        run = run_playbook(pb, check=True, diff=True)
        assert run.rc == 0, run.output
        for task in ("Apply the operand's configuration named cluster, OperatorConfig",
                     "Apply the ClusterSecretStore and wait until ESO calls it Ready, vault"):
            r = run.task(f"{ROLE} : {task}")
            assert r["changed"] and r["results"][0]["note"] == f"would create (kind not served yet: installed by {by})", r
        time.sleep(0.5)
        writes = [e for e in fresh_api.audit_events()[since:] if e["user"]["username"] == "kc-admin"
                  and e["verb"] in ("create", "update", "patch", "delete") and "dryRun=All" not in e["requestURI"]]
        assert writes == [], writes

        run = run_playbook(pb)
        assert run.rc == 0, run.output
        sub = fresh_api.get(f"/apis/operators.coreos.com/v1alpha1/namespaces/{ns}/subscriptions/external-secrets-operator")
        assert (sub["spec"]["channel"], sub["spec"]["source"]) == ("stable", "community-operators"), sub["spec"]
        assert fresh_api.get(f"/apis/operator.external-secrets.io/v1alpha1/namespaces/{ns}/operatorconfigs/cluster")
        store = fresh_api.get("/apis/external-secrets.io/v1beta1/clustersecretstores/vault")
        assert store["apiVersion"] == "external-secrets.io/v1beta1" and \
            store["status"]["conditions"][0]["status"] == "True", store
        assert store["spec"]["conditions"] == [{"namespaceSelector": {"matchLabels": {"team": "a"}}}], store["spec"]
        assert fresh_api.request("GET", "/apis/external-secrets.io/v1")[0] == 404

        run = run_playbook(play(kubeconfig, openbao, openbao.token, external_secrets_cluster=cluster,
                                external_secrets_namespace=ns, external_secrets_distribution="community",
                                external_secrets_store_name="broken", external_secrets_store_timeout=3,
                                external_secrets_namespaces=[ns]))
    assert run.rc != 0
    msg = run.task(f"{ROLE} : Apply the ClusterSecretStore and wait until ESO calls it Ready, broken")["msg"]
    assert "Ready=True (now False, InvalidProviderConfig: unable to validate store: permission denied (Vault role))" \
        in msg, msg
