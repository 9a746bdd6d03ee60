"""proxshift.openshift.cluster_config through real ansible-playbook against the real kube-apiserver
(kube_fixtures.py): server-side apply, idempotence decided by the server's dry run, check mode as
dryRun=All (shown by the audit log and GETs), diffs with Secret values hidden, delete, waits, bad input."""
from __future__ import annotations

import base64
import json
import time

from kube_fixtures import KubeApi, condition, kube_api, unique  # noqa: F401 (fixtures)

# The leak scan (tests/leakscan.py) fails the session if this shows in any output.
SECRET_CANARY = "cfg-secret-canary-7d3e91"
SECRET_CANARY_2 = "cfg-secret-canary-2-b84f"
MC = "/apis/cluster.open-cluster-management.io/v1/managedclusters"


def play(*tasks: dict) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": list(tasks)}])


def conn(kube_api: KubeApi) -> dict:
    return {"host": kube_api.url, "api_key": kube_api.admin_token, "ca_cert": kube_api.ca_cert}


def task(name: str, kube_api: KubeApi, **args) -> dict:
    return {"name": name, "proxshift.openshift.cluster_config": {**conn(kube_api), **args}}


def ns(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def cm(name: str, namespace: str, **data) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def writes_to(kube_api: KubeApi, fragment: str, since: int) -> list[dict]:
    """Audit events after the first `since` that wrote (not dry-run) to a path containing `fragment`."""
    return [e for e in kube_api.audit_events()[since:]
            if fragment in e["requestURI"] and e["verb"] in ("create", "update", "patch", "delete")
            and "dryRun=All" not in e["requestURI"]]


def settle(kube_api: KubeApi) -> int:
    """The audit log's length once the events of the requests answered so far are written."""
    time.sleep(0.5)
    return len(kube_api.audit_events())


def test_create_rerun_change_with_diff(run_playbook, kube_api: KubeApi):
    n = unique("cfg")
    objs = [ns(n), cm("settings", n, mode="lab")]
    run = run_playbook(play(task("apply", kube_api, objects=objs)))
    assert run.rc == 0, run.output
    r = run.task("apply")
    assert r["changed"] is True
    assert [x["action"] for x in r["results"]] == ["created", "created"]
    assert r["results"][1]["object"]["metadata"]["namespace"] == n
    assert "managedFields" not in r["results"][1]["object"]["metadata"]
    got = kube_api.get(f"/api/v1/namespaces/{n}/configmaps/settings")
    assert got["data"] == {"mode": "lab"}
    assert [m["manager"] for m in got["metadata"]["managedFields"]] == ["proxshift"]

    # The rerun: the dry run shows no change, so nothing is written.
    before = settle(kube_api)
    run = run_playbook(play(task("again", kube_api, objects=objs)))
    assert run.rc == 0, run.output
    r = run.task("again")
    assert r["changed"] is False, r
    assert [x["action"] for x in r["results"]] == ["unchanged", "unchanged"]
    settle(kube_api)
    assert writes_to(kube_api, f"/namespaces/{n}/configmaps/settings", before) == []
    assert writes_to(kube_api, f"/api/v1/namespaces/{n}", before) == []

    # A changed field: changed, with the old and new value in the diff (YAML definition this time).
    definition = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {n}}}\ndata: {{mode: prod}}\n"
    run = run_playbook(play(task("change", kube_api, definition=definition)), diff=True)
    assert run.rc == 0, run.output
    r = run.task("change")
    assert r["changed"] is True and r["results"][0]["action"] == "updated"
    lines = run.stdout.splitlines()
    assert any(x.startswith("-") and '"mode": "lab"' in x for x in lines), run.stdout
    assert any(x.startswith("+") and '"mode": "prod"' in x for x in lines), run.stdout
    assert kube_api.get(f"/api/v1/namespaces/{n}/configmaps/settings")["data"] == {"mode": "prod"}


def test_check_mode_is_a_server_dry_run_and_stores_nothing(run_playbook, kube_api: KubeApi):
    n = unique("cfgcheck")
    objs = [cm("in-default", "default", a="1"), ns(n), cm("in-new", n, b="2")]
    since = settle(kube_api)
    run = run_playbook(play(task("apply", kube_api, objects=objs)), check=True, diff=True)
    assert run.rc == 0, run.output
    r = run.task("apply")
    assert r["changed"] is True
    assert [x["action"] for x in r["results"]] == ["created"] * 3
    # The server defaulted and validated the dry run: it answers with a uid and creation time it never stored.
    assert r["results"][0]["object"]["metadata"]["uid"]
    assert "namespace" in r["results"][2]["note"]
    assert "check mode" in r["msg"]
    assert kube_api.get("/api/v1/namespaces/default/configmaps/in-default") is None
    assert kube_api.get(f"/api/v1/namespaces/{n}") is None
    settle(kube_api)
    assert writes_to(kube_api, "/configmaps/in-default", since) == []
    assert writes_to(kube_api, f"/namespaces/{n}", since) == []
    dry = [e for e in kube_api.audit_events()[since:] if "/configmaps/in-default" in e["requestURI"] and e["verb"] == "patch"]
    assert dry and all("dryRun=All" in e["requestURI"] for e in dry), dry


def admin_writes(kube_api: KubeApi, since: int) -> list[dict]:
    """Audit events after the first `since` that wrote (not dry-run) as the admin token's user, the modules'."""
    return [e for e in kube_api.audit_events()[since:]
            if e["user"]["username"] == "admin" and e["verb"] in ("create", "update", "patch", "delete")
            and "dryRun=All" not in e["requestURI"]]


def test_check_mode_predicts_what_an_operator_brings(run_playbook, kube_api: KubeApi):
    """A fresh cluster: the kind comes with an operator's CRD and the namespace with the operator. With
    installed_by, --check predicts both (no failure, no write); without it a kind that is not served still
    fails check mode, as it fails a real run."""
    n = unique("cfgpend")
    group = f"{n}.proxshift.test"  # served by no CRD in this API server
    operator = "the Widget operator"
    objs = [{"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}},
            cm("settings", n, mode="lab")]
    since = settle(kube_api)
    run = run_playbook(play(task("apply", kube_api, objects=objs, installed_by=operator),
                            task("read", kube_api, state="read", objects=objs[:1], installed_by=operator),
                            task("typo", kube_api, objects=objs[:1])), check=True, diff=True)
    assert run.rc != 0, run.output
    r = run.task("apply")
    assert r["changed"] is True, r
    assert [x["action"] for x in r["results"]] == ["created", "created"], r
    assert r["results"][0]["note"] == f"would create (kind not served yet: installed by {operator})", r
    assert r["results"][1]["note"] == f"would create (namespace {n} not there yet: created by {operator})", r
    assert f"objects[0] Widget w would create (kind not served yet: installed by {operator})" in r["msg"], r["msg"]
    assert any(x.startswith("+") and '"size": 1' in x for x in run.stdout.splitlines()), run.stdout
    read = run.task("read")
    assert read["changed"] is False and read["results"][0]["action"] == "not_found", read
    typo = run.task("typo")
    assert run.status("typo") == "failed" and f"does not serve {group}/v1" in typo["msg"], typo
    settle(kube_api)
    assert admin_writes(kube_api, since) == []


def test_secret_values_never_show(run_playbook, kube_api: KubeApi):
    n = unique("cfgsec")
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": n},
              "stringData": {"password": SECRET_CANARY, "user": "admin-user"}}
    run = run_playbook(play(task("apply", kube_api, objects=[ns(n), secret])), diff=True, verbosity=2)
    assert run.rc == 0, run.output
    obj = run.task("apply")["results"][1]["object"]
    assert obj["data"] == {"password": "<hidden>", "user": "<hidden>"}
    changed = {**secret, "stringData": {"password": SECRET_CANARY_2, "user": "admin-user"}}
    run2 = run_playbook(play(task("change", kube_api, objects=[changed])), diff=True, verbosity=2)
    assert run2.rc == 0, run2.output
    assert run2.task("change")["changed"] is True
    # The diff says which key changed without showing either value.
    assert '"password": "<hidden, changed>"' in run2.stdout and '"user": "<hidden>"' in run2.stdout, run2.stdout
    run3 = run_playbook(play(task("again", kube_api, objects=[changed])), check=True, diff=True)
    assert run3.task("again")["changed"] is False
    for out in (run.output, run2.output, run3.output):
        for v in (SECRET_CANARY, SECRET_CANARY_2):
            assert v not in out
    assert kube_api.get(f"/api/v1/namespaces/{n}/secrets/creds")["data"]["password"] == \
        base64.b64encode(SECRET_CANARY_2.encode()).decode()


def test_delete_only_changes_what_exists(run_playbook, kube_api: KubeApi):
    n = unique("cfgdel")
    kube_api.ok("POST", "/api/v1/namespaces", ns(n))
    kube_api.ok("POST", f"/api/v1/namespaces/{n}/configmaps", cm("gone", n, x="1"))
    objs = [ns(n), cm("gone", n)]
    run = run_playbook(play(task("check", kube_api, objects=[cm("gone", n)], state="absent")), check=True)
    assert run.task("check")["changed"] is True
    assert kube_api.get(f"/api/v1/namespaces/{n}/configmaps/gone") is not None, "check mode must not delete"
    run = run_playbook(play(task("delete", kube_api, objects=[cm("gone", n)], state="absent"),
                            task("again", kube_api, objects=[cm("gone", n)], state="absent")))
    assert run.rc == 0, run.output
    assert run.task("delete")["changed"] is True
    assert [x["action"] for x in run.task("delete")["results"]] == ["deleted"]
    assert run.task("again")["changed"] is False
    assert [x["action"] for x in run.task("again")["results"]] == ["absent"]
    assert kube_api.get(f"/api/v1/namespaces/{n}/configmaps/gone") is None
    # Several objects go in reverse order: what is in the namespace before the namespace.
    run = run_playbook(play(task("both", kube_api, objects=objs, state="absent")))
    assert [x["kind"] for x in run.task("both")["results"]] == ["ConfigMap", "Namespace"]


def test_wait_met_and_timeout_names_what_is_pending(run_playbook, kube_api: KubeApi):
    c = unique("cfgwait")
    mc = {"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
          "metadata": {"name": c}, "spec": {"hubAcceptsClient": True}}
    run = run_playbook(play(task("apply", kube_api, objects=[mc])))
    assert run.rc == 0, run.output
    # The test plays the controller: it reports one condition True, one False.
    kube_api.patch_status(f"{MC}/{c}", {"conditions": [
        condition("ManagedClusterJoined", "True"),
        {**condition("ManagedClusterConditionAvailable", "False", "the lease is not renewed"),
         "lastTransitionTime": "2026-01-02T00:00:00Z"}]})
    run = run_playbook(play(task("met", kube_api, objects=[mc], wait=[
        {"type": "ManagedClusterJoined"}, {"path": "spec.hubAcceptsClient", "value": "true"}], wait_timeout=5)))
    assert run.rc == 0, run.output
    assert run.task("met")["changed"] is False

    run = run_playbook(play(task("late", kube_api, objects=[mc], wait_timeout=1, wait_interval=1, wait=[
        {"type": "ManagedClusterConditionAvailable"},
        {"path": "status.version.kubernetes", "kind": "ManagedCluster"}])))
    assert run.rc != 0
    r = run.task("late")
    assert run.status("late") == "failed"
    assert f"ManagedCluster {c}" in r["msg"], r["msg"]
    assert "ManagedClusterConditionAvailable=True (now False, Test: the lease is not renewed)" in r["msg"], r["msg"]
    pending = r["results"][0]["pending"]
    assert "status.version.kubernetes to be set" in pending, pending
    assert "last condition: ManagedClusterConditionAvailable=False (Test: the lease is not renewed)" in pending, pending


def test_bad_input_is_a_clear_failure(run_playbook, kube_api: KubeApi):
    n = unique("cfgbad")
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}}
    pod_kind = {"apiVersion": "v1", "kind": "Pood", "metadata": {"name": "p"}}
    run = run_playbook(play(
        {**task("unknown group", kube_api, objects=[widget]), "ignore_errors": True},
        {**task("unknown kind", kube_api, objects=[pod_kind]), "ignore_errors": True},
        {**task("no name", kube_api, objects=[{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}]),
         "ignore_errors": True},
        {**task("bad wait", kube_api, objects=[cm("x", "default")], wait=[{"value": "1"}]), "ignore_errors": True},
        {**task("invalid", kube_api, objects=[cm("Not_A_Name", "default")]), "ignore_errors": True},
    ))
    msg = {t: run.task(t)["msg"] for t in ("unknown group", "unknown kind", "no name", "bad wait", "invalid")}
    assert msg["unknown group"].startswith("objects[0] (example.com/v1 Widget w): the API server does not serve example.com/v1"), msg
    assert "has no kind Pood" in msg["unknown kind"] and "check apiVersion and kind" in msg["unknown kind"], msg
    assert msg["no name"] == "objects[0] has no metadata.name", msg
    assert msg["bad wait"].startswith("wait[0] needs either type"), msg
    assert "objects[0] (v1 ConfigMap default/Not_A_Name)" in msg["invalid"] and "422" in msg["invalid"], msg
    assert all(run.task(t)["changed"] is False for t in msg)

    # A field another manager owns: a conflict naming the option, then taken over with force_conflicts.
    kube_api.ok("POST", "/api/v1/namespaces", ns(n))
    kube_api.ok("PATCH", f"/api/v1/namespaces/{n}/configmaps/owned?fieldManager=someone-else",
                json.dumps(cm("owned", n, k="theirs")).encode(), content_type="application/apply-patch+yaml")
    run = run_playbook(play({**task("clash", kube_api, objects=[cm("owned", n, k="ours")]), "ignore_errors": True},
                            task("force", kube_api, objects=[cm("owned", n, k="ours")], force_conflicts=True)))
    assert "409" in run.task("clash")["msg"] and "force_conflicts" in run.task("clash")["msg"], run.task("clash")
    assert run.task("force")["changed"] is True
    assert kube_api.get(f"/api/v1/namespaces/{n}/configmaps/owned")["data"] == {"k": "ours"}


def test_read_lists_a_kind_and_reads_one(run_playbook, kube_api: KubeApi):
    n = unique("cfgread")
    kube_api.ok("POST", "/api/v1/namespaces", ns(n))
    kube_api.ok("POST", f"/api/v1/namespaces/{n}/configmaps", cm("a", n, x="1"))
    run = run_playbook(play(task("read", kube_api, state="read", namespace=n, objects=[
        {"apiVersion": "v1", "kind": "ConfigMap"}, cm("a", n), cm("missing", n)])), check=True)
    assert run.rc == 0, run.output
    r = run.task("read")
    assert r["changed"] is False
    names = [i["metadata"]["name"] for i in r["results"][0]["objects"]]
    assert "a" in names
    assert [x["action"] for x in r["results"]] == ["read", "read", "not_found"]
    assert r["results"][1]["object"]["data"] == {"x": "1"}


def test_a_kubernetes_core_k8s_task_ported_by_its_module_name(run_playbook, kube_api: KubeApi, tmp_path):
    """kubernetes.core.k8s's options and K8S_AUTH_* environment, unchanged but for the module name: definition as
    a list, src, apply, wait: true with wait_sleep (readiness as kubernetes.core's waiter judges it), wait_condition,
    and the connection from K8S_AUTH_HOST/API_KEY/SSL_CA_CERT/VERIFY_SSL alone."""
    n = unique("k8s")
    src = tmp_path / "extra.yaml"
    src.write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: from-src, namespace: {n}}}\ndata: {{a: b}}\n")
    env = {"K8S_AUTH_HOST": kube_api.url, "K8S_AUTH_API_KEY": kube_api.admin_token,
           "K8S_AUTH_SSL_CA_CERT": str(kube_api.ca_cert), "K8S_AUTH_VERIFY_SSL": "true"}
    k8s = "proxshift.openshift.cluster_config"
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": n},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}},
                                        "spec": {"containers": [{"name": "web", "image": "registry.example/web:1"}]}}}}
    run = run_playbook(play(
        {"name": "list", k8s: {"state": "present", "apply": True, "definition": [ns(n), cm("listed", n, x="1")],
                               "wait": True, "wait_sleep": 1}},
        {"name": "src", k8s: {"state": "present", "src": str(src), "wait": True,
                              "wait_condition": {"type": "Nothing"}, "wait_timeout": 2}},
    ), env=env)
    assert run.task("list")["changed"] is True, run.output
    assert kube_api.get(f"/api/v1/namespaces/{n}/configmaps/listed")["data"] == {"x": "1"}
    # wait_condition: a ConfigMap never shows the condition, so the wait names it.
    src_r = run.task("src")
    assert run.status("src") == "failed" and "Nothing=True" in src_r["msg"], src_r
    assert kube_api.get(f"/api/v1/namespaces/{n}/configmaps/from-src")["data"] == {"a": "b"}
    # wait: true on a Deployment: the real controller manager rolls it out, but no kubelet runs its pod, so the
    # readiness kubernetes.core's waiter asks for never comes, and the timeout says what is missing.
    run = run_playbook(play({"name": "deploy", k8s: {"definition": deployment, "wait": True, "wait_timeout": 6,
                                                     "wait_sleep": 1}}), env=env)
    r = run.task("deploy")
    assert run.status("deploy") == "failed", r
    assert "1 ready replica(s), 0 so far" in r["msg"], r["msg"]
    # K8S_AUTH_VERIFY_SSL=false is read: a warning that certificates are not checked.
    run = run_playbook(play({"name": "read", k8s: {"state": "read", "definition": ns(n)}}),
                       env={**env, "K8S_AUTH_VERIFY_SSL": "false", "K8S_AUTH_SSL_CA_CERT": ""})
    r = run.task("read")
    assert run.status("read") == "ok", r
    assert any("validate_certs is off" in w for w in r.get("warnings", [])), r
