"""Fault matrix, Kubernetes side (a real kube-apiserver, the openshift area's fixtures): a field owned
by another manager (409 conflict), RBAC that forbids the import (403) and a server certificate from the
wrong CA. Each fails with a clear message and leaves the hub as it was; the rerun converges to one
ManagedCluster and a second pass changes nothing.
"""
from __future__ import annotations

import json
import os
import re

import pytest

MC = "/apis/cluster.open-cluster-management.io/v1/managedclusters"
SPOKE_TOKEN = "spoke-token-canary-reliability-0c4d"


def play(*tasks: dict) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": list(tasks)}])


def imp(name: str, kube_api, cluster: str, **over) -> dict:
    args = {"cluster_name": cluster, "hub_host": kube_api.url, "hub_api_key": kube_api.admin_token,
            "hub_ca_cert": kube_api.ca_cert, "spoke_host": "https://api.spoke.example.com:6443",
            "spoke_api_key": SPOKE_TOKEN, "poll_interval": 1, "wait_timeout": 5, **over}
    return {"name": name, "proxshift.openshift.acm_import": args, "ignore_errors": True}


def hand_edit(kube_api, cluster):
    """Another field manager owns spec.hubAcceptsClient (with the opposite value)."""
    kube_api.ok("PATCH", f"{MC}/{cluster}?fieldManager=hand-edit&force=true",
                {"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                 "metadata": {"name": cluster}, "spec": {"hubAcceptsClient": False}},
                content_type="application/apply-patch+yaml")
    return {}


CASES = {
    "kube-409-conflict": (hand_edit, [r"409", r"hand-edit", r"force_conflicts"], {"force_conflicts": True}),
    "kube-403-rbac": (lambda k, c: {"hub_api_key": k.viewer_token}, [r"HTTP 403 forbidden"], {}),
    "kube-tls-wrong-ca": (lambda k, c: {"hub_ca_cert": k.wrong_ca_cert}, [r"(?i)certificate"], {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_kube_fault_is_clear_and_the_rerun_converges(case, kube_api, run_playbook):
    setup, expect, fix = CASES[case]
    cluster = f"rel-{case.split('-')[1]}-{os.getpid() % 1000}"
    over = setup(kube_api, cluster)
    before = kube_api.get(f"{MC}/{cluster}")
    run = run_playbook(play(imp("Import", kube_api, cluster, **over)))
    assert run.status("Import") == "failed", run.output
    msg = run.task("Import")["msg"]
    for rx in expect:
        assert re.search(rx, msg), f"{rx!r} not in {msg!r}"
    assert SPOKE_TOKEN not in run.output and kube_api.admin_token not in run.output
    after = kube_api.get(f"{MC}/{cluster}")
    assert (after or {}).get("spec") == (before or {}).get("spec"), "the failed import changed the hub"

    run = run_playbook(play(imp("Rerun", kube_api, cluster, **fix), imp("Again", kube_api, cluster, **fix)))
    assert run.status("Rerun") == "ok" and run.status("Again") == "ok", run.output
    assert run.task("Again")["changed"] is False, run.task("Again")
    mc = kube_api.get(f"{MC}/{cluster}")
    assert mc["spec"]["hubAcceptsClient"] is True
    listed = [m["metadata"]["name"] for m in kube_api.get(MC)["items"]]
    assert listed.count(cluster) == 1
    assert SPOKE_TOKEN not in run.output
