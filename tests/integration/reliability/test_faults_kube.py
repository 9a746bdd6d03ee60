"""Fault matrix, Kubernetes side (a real kube-apiserver, the openshift area's fixtures and helpers): a
field owned by another manager (409 conflict), RBAC that forbids the import (403) and a server
certificate from the wrong CA. Each fails with a clear message and leaves the objects as they were; the
rerun converges and a second pass changes nothing.
"""
from __future__ import annotations

import json
import re

import pytest
from kube_fixtures import b64, unique
from test_acm_import import import_secret

MC = "/apis/cluster.open-cluster-management.io/v1/managedclusters"
SPOKE_TOKEN = "spoke-token-canary-reliability-0c4d"


def play(*tasks: dict) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": list(tasks)}])


def imp(name: str, kube_api, cluster: str, **over) -> dict:
    args = {"cluster_name": cluster, "hub_host": kube_api.url, "hub_api_key": kube_api.admin_token,
            "hub_ca_cert": kube_api.ca_cert, "poll_interval": 1, "wait_timeout": 5, **over}
    return {"name": name, "proxshift.openshift.acm_import": args, "ignore_errors": True}


def assert_failed(run, name: str, *patterns: str):
    assert run.status(name) == "failed", run.output
    msg = run.task(name)["msg"]
    for rx in patterns:
        assert re.search(rx, msg), f"{rx!r} not in {msg!r}"


AUTO = {"spoke_host": "https://api.spoke.example.com:6443", "spoke_api_key": SPOKE_TOKEN}
CASES = {
    "kube-403-rbac": (lambda k: {"hub_api_key": k.viewer_token}, [r"HTTP 403 forbidden", r"managedclusters"]),
    "kube-tls-wrong-ca": (lambda k: {"hub_ca_cert": k.wrong_ca_cert}, [r"(?i)certificate"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_hub_call_changes_nothing_and_the_rerun_imports_once(case, kube_api, run_playbook):
    broken, patterns = CASES[case]
    cluster = unique("rel")
    run = run_playbook(play(imp("Import", kube_api, cluster, **AUTO, **broken(kube_api))))
    assert_failed(run, "Import", *patterns)
    assert kube_api.get(f"{MC}/{cluster}") is None, "the refused import created the ManagedCluster"
    assert SPOKE_TOKEN not in run.output and kube_api.admin_token not in run.output

    run = run_playbook(play(imp("Rerun", kube_api, cluster, **AUTO), imp("Again", kube_api, cluster, **AUTO)))
    assert run.status("Rerun") == "ok" and run.status("Again") == "ok", run.output
    assert run.task("Rerun")["changed"] is True and run.task("Again")["changed"] is False
    assert kube_api.get(f"{MC}/{cluster}")["spec"]["hubAcceptsClient"] is True
    assert [m["metadata"]["name"] for m in kube_api.get(MC)["items"]].count(cluster) == 1
    secret = kube_api.get(f"/api/v1/namespaces/{cluster}/secrets/auto-import-secret")
    assert secret["data"]["token"] == b64(SPOKE_TOKEN)
    assert SPOKE_TOKEN not in run.output


def test_409_field_conflict_is_named_and_force_converges(kube_api, spoke_api, run_playbook, tmp_path):
    """Manual import: another field manager took over the spoke's bootstrap secret; the import must
    refuse (naming the manager and the way out) without touching it, and force_conflicts converges."""
    c = unique("rel-409")
    agent_ns = f"ocm-agent-{c}"
    spoke_kc = tmp_path / "spoke.kubeconfig"
    spoke_kc.write_text(spoke_api.kubeconfig(spoke_api.kubeconfig_token))
    kube_api.ok("POST", "/api/v1/namespaces", {"metadata": {"name": c}})
    kube_api.ok("POST", f"/api/v1/namespaces/{c}/secrets", import_secret(c, agent_ns, "bootstrap-v1"))
    args = dict(mode="manual", spoke_kubeconfig=str(spoke_kc), klusterlet_addon_config=False)
    assert run_playbook(play(imp("Prepare", kube_api, c, **args))).status("Prepare") == "ok"
    secret_path = f"/api/v1/namespaces/{agent_ns}/secrets/bootstrap-hub-kubeconfig"
    spoke_api.ok("PATCH", f"{secret_path}?fieldManager=hand-edit&force=true",
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bootstrap-hub-kubeconfig", "namespace": agent_ns},
                 "data": {"kubeconfig": b64("edited")}}, content_type="application/apply-patch+yaml")
    kube_api.ok("PUT", f"/api/v1/namespaces/{c}/secrets/{c}-import", import_secret(c, agent_ns, "bootstrap-v2"))

    run = run_playbook(play(imp("Import", kube_api, c, **args)))
    assert_failed(run, "Import", r"HTTP 409 conflict", r"hand-edit", r"force_conflicts")
    assert spoke_api.get(secret_path)["data"]["kubeconfig"] == b64("edited"), "the refused apply wrote"

    forced = {**args, "force_conflicts": True}
    run = run_playbook(play(imp("Rerun", kube_api, c, **forced), imp("Again", kube_api, c, **forced)))
    assert run.status("Rerun") == "ok" and run.status("Again") == "ok", run.output
    assert run.task("Again")["changed"] is False
    assert spoke_api.get(secret_path)["data"]["kubeconfig"] == b64("bootstrap-v2")
