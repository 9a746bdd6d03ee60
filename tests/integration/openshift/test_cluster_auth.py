"""proxshift.openshift.cluster_auth through real ansible-playbook, against a real kube-apiserver and a
fake OpenShift OAuth endpoint (see kube_fixtures.py)."""
from __future__ import annotations

import json

from kube_fixtures import OAUTH_PASSWORD, KubeApi, condition, fake_oauth, kube_api  # noqa: F401 (fixtures)


def play(*tasks: dict) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": list(tasks)}])


def task(name: str, args: dict, **extra) -> dict:
    return {"name": name, "proxshift.openshift.cluster_auth": args, **extra}


def test_api_key_and_kubeconfig_logins(run_playbook, kube_api: KubeApi, tmp_path):
    kc = tmp_path / "kubeconfig"
    kc.write_text(kube_api.kubeconfig(kube_api.kubeconfig_token))
    run = run_playbook(play(
        task("token", {"api_url": kube_api.url, "api_key": kube_api.admin_token, "ca_cert": kube_api.ca_cert,
                       "wait_for": ["api"], "timeout": 30, "poll_interval": 1}),
        task("kubeconfig file", {"kubeconfig": str(kc)}),
        task("client certificate", {"kubeconfig": kube_api.admin_cert_kubeconfig}),
    ), verbosity=3)
    assert run.rc == 0, run.output
    r = run.task("token")
    assert r["changed"] is False
    assert r["host"] == kube_api.url and r["auth_method"] == "api_key"
    assert r["readiness"]["api"]["ready"] is True
    assert kube_api.admin_token not in run.output
    r = run.task("kubeconfig file")
    assert r["auth_method"] == "kubeconfig" and r["username"] == "t"
    assert r["api_key"] == kube_api.kubeconfig_token  # usable by later tasks
    r = run.task("client certificate")
    assert r["api_key"] is None and r["username"] == "admin"


def test_password_login_token_use_and_revocation(run_playbook, kube_api, fake_oauth):
    login = {"api_url": fake_oauth, "username": "kubeadmin", "password": OAUTH_PASSWORD, "ca_cert": kube_api.ca_cert}
    use = {"api_url": fake_oauth, "api_key": "{{ auth.api_key }}", "ca_cert": kube_api.ca_cert}
    run = run_playbook(play(
        task("login", login, register="auth", no_log=True),
        task("use the token", use),
        task("revoke (check mode)", {**use, "state": "absent"}, check_mode=True),
        task("still valid", use),
        task("revoke", {**use, "state": "absent"}),
        task("revoke again", {**use, "state": "absent"}),
        task("revoked token is refused", use, ignore_errors=True),
        {"name": "facts", "ansible.builtin.assert": {"that": [
            "auth.api_key is match('sha256~')", "auth.token_expires_in == 86400",
            "auth.username == 'kube:admin'", "auth.k8s_auth.host == '" + fake_oauth + "'"]}},
    ), verbosity=2)
    assert run.rc == 0, run.output
    assert run.task("use the token")["username"] == "kube:admin"
    assert run.task("revoke (check mode)")["changed"] is True
    assert run.task("revoke (check mode)")["revoked"] is False
    assert run.task("revoke")["revoked"] is True
    assert run.task("revoke again")["changed"] is False
    refused = run.task("revoked token is refused")
    assert run.status("revoked token is refused") == "failed" and "401" in refused["msg"]
    assert OAUTH_PASSWORD not in run.output
    assert "sha256~" not in run.output, "the token must never be displayed"


def test_wrong_password_and_wrong_ca(run_playbook, kube_api, fake_oauth):
    run = run_playbook(play(
        task("wrong password", {"api_url": fake_oauth, "password": "not-the-password-1", "ca_cert": kube_api.ca_cert},
             ignore_errors=True),
        task("wrong CA", {"api_url": kube_api.url, "api_key": kube_api.admin_token, "ca_cert": kube_api.wrong_ca_cert},
             ignore_errors=True),
        task("RBAC", {"api_url": kube_api.url, "api_key": kube_api.viewer_token, "ca_cert": kube_api.ca_cert,
                      "wait_for": ["nodes"], "timeout": 60}, ignore_errors=True),
    ))
    assert run.rc == 0, run.output
    assert "wrong username or password" in run.task("wrong password")["msg"]
    msg = run.task("wrong CA")["msg"]
    assert "UnknownIssuer" in msg or "certificate" in msg, msg
    msg = run.task("RBAC")["msg"]
    assert "HTTP 403 forbidden" in msg and "nodes" in msg, msg


def test_wait_targets_pending_then_ready(run_playbook, kube_api: KubeApi):
    wait = {"api_url": kube_api.url, "api_key": kube_api.admin_token, "ca_cert": kube_api.ca_cert,
            "wait_for": ["api", "clusterversion", "operators", "nodes"], "expected_nodes": 1,
            "timeout": 2, "poll_interval": 1, "stable_polls": 1}
    run = run_playbook(play(task("not ready", wait, ignore_errors=True)))
    r = run.task("not ready")
    assert run.status("not ready") == "failed" and "timed out" in r["msg"]
    assert any("ClusterVersion 'version' does not exist" in p for p in r["pending"]), r["pending"]
    assert any("no ClusterOperators" in p for p in r["pending"]), r["pending"]
    assert any("0 of 1 expected nodes" in p for p in r["pending"]), r["pending"]
    assert r["readiness"]["api"]["ready"] is True

    # Play the cluster: everything settles.
    kube_api.ok("POST", "/apis/config.openshift.io/v1/clusterversions", {
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
        "spec": {"clusterID": "6c1f5a2e-0000-4000-8000-000000000002"}})
    kube_api.patch_status("/apis/config.openshift.io/v1/clusterversions/version", {
        "desired": {"version": "4.19.7", "image": "quay.io/x@sha256:0"}, "observedGeneration": 1, "versionHash": "x",
        "availableUpdates": [],
        "history": [{"state": "Completed", "version": "4.19.7", "image": "x", "verified": False,
                     "startedTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T01:00:00Z"}],
        "conditions": [condition("Available", "True"), condition("Progressing", "False"), condition("Failing", "False")]})
    kube_api.ok("POST", "/apis/config.openshift.io/v1/clusteroperators", {
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": {"name": "etcd"}, "spec": {}})
    kube_api.patch_status("/apis/config.openshift.io/v1/clusteroperators/etcd", {
        "conditions": [condition("Available", "True"), condition("Progressing", "False"),
                       condition("Degraded", "True", "member down")]})
    kube_api.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "sno-0"}})
    kube_api.patch_status("/api/v1/nodes/sno-0", {"conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})

    run = run_playbook(play(task("degraded", wait, ignore_errors=True)))
    r = run.task("degraded")
    assert r["pending"] == ["operator etcd: Degraded=False (now True, Test: member down)"], r
    assert r["version"] == "4.19.7"

    kube_api.patch_status("/apis/config.openshift.io/v1/clusteroperators/etcd", {
        "conditions": [condition("Available", "True"), condition("Progressing", "False"),
                       condition("Degraded", "False", "all members up")]})
    run = run_playbook(play(task("ready", {**wait, "timeout": 30, "stable_polls": 2})))
    assert run.rc == 0, run.output
    r = run.task("ready")
    assert r["changed"] is False and r["version"] == "4.19.7"
    assert all(r["readiness"][t]["ready"] for t in ("api", "clusterversion", "operators", "nodes"))
    assert r["readiness"]["operators"]["stable_polls"] == 2 and r["readiness"]["operators"]["polls"] == 2, r
