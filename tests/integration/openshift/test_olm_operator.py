"""The OLM operator helper (role proxshift.openshift.olm_operator, through post_install_operators of the
post_install role) with real ansible-playbook against the real kube-apiserver (kube_fixtures.py) carrying
OLM's upstream CRDs (tests/fixtures/crds/operators.coreos.com_*.yaml).

No OLM runs here: `FakeOlm` (tests/standins/olm.py) plays its part by writing what OLM writes — the Subscription's status
(currentCSV, installedCSV, installPlanRef, conditions), the InstallPlans and the ClusterServiceVersion with
its status phase — from the Subscription the role applied. It moves a CSV from Installing to Succeeded only
after the role has read it once (the audit log shows the GET), so the role's wait is seen to wait.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from standins.olm import GROUPS, MISSING_SOURCE, OPS, SUCCEEDED, UNKNOWN_CHANNEL, FakeOlm
from kube_fixtures import KubeApi, kube_api, unique  # noqa: F401 (fixtures)

ROLE = "proxshift.openshift.olm_operator"


def play(kubeconfig: Path, operators: list[dict], **more) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "post", "ansible.builtin.import_role": {"name": "proxshift.openshift.post_install"},
         "vars": {"post_install_kubeconfig": str(kubeconfig), "post_install_operators": operators,
                  "post_install_operator_timeout": 30, "post_install_operator_interval": 1, **more}}]}])


@pytest.fixture
def kubeconfig(kube_api: KubeApi, tmp_path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(kube_api.kubeconfig(kube_api.kubeconfig_token))
    return path


def role_tasks(run, status: str | None = None) -> list[str]:
    return [r["task"] for r in run.results if r["task"].startswith(ROLE) and (status is None or r["status"] == status)]


def changed(run) -> list[str]:
    return [t.split(" : ", 1)[1] for t in run.changed_tasks()]


def wait_result(run, what: str) -> dict:
    found = [r["result"] for r in run.results if r["task"].startswith(f"{ROLE} : Wait for {what}")]
    assert found, [r["task"] for r in run.results]
    return found[-1]


def test_automatic_install_check_mode_and_rerun(run_playbook, kube_api: KubeApi, kubeconfig):
    ns = unique("olm-auto")
    op = {"name": "demo-operator", "namespace": ns, "channel": "stable", "source": "redhat-operators",
          "namespace_labels": {"openshift.io/cluster-monitoring": "true"}, "config": {"env": [{"name": "MODE", "value": "lab"}]}}
    with FakeOlm(kube_api, ns):
        run = run_playbook(play(kubeconfig, [op]), check=True, diff=True)
        assert run.rc == 0, run.output
        assert kube_api.get(f"/api/v1/namespaces/{ns}") is None, "check mode must not create"
        assert changed(run) == ["Apply the Namespace, OperatorGroup and Subscription of demo-operator"]
        applied = run.task(f"{ROLE} : Apply the Namespace, OperatorGroup and Subscription of demo-operator")
        assert [(r["kind"], r["action"]) for r in applied["results"]] == [
            ("Namespace", "created"), ("OperatorGroup", "created"), ("Subscription", "created")]
        assert any(x.startswith("+") and '"installPlanApproval": "Automatic"' in x for x in run.stdout.splitlines()), run.stdout

        run = run_playbook(play(kubeconfig, [op]))
        assert run.rc == 0, run.output
        assert changed(run) == ["Apply the Namespace, OperatorGroup and Subscription of demo-operator"]
        # The CSV was Installing at the first look and Succeeded at a later one.
        assert wait_result(run, "the ClusterServiceVersion")["attempts"] >= 2
        assert kube_api.get(f"/api/v1/namespaces/{ns}")["metadata"]["labels"]["openshift.io/cluster-monitoring"] == "true"
        og = kube_api.get(f"{GROUPS}/{ns}/operatorgroups/{ns}")
        assert og["spec"]["targetNamespaces"] == [ns]
        sub = kube_api.get(f"{OPS}/{ns}/subscriptions/demo-operator")
        assert sub["spec"] == {"name": "demo-operator", "channel": "stable", "source": "redhat-operators",
                               "sourceNamespace": "openshift-marketplace", "installPlanApproval": "Automatic",
                               "config": {"env": [{"name": "MODE", "value": "lab"}]}}
        assert kube_api.get(f"{OPS}/{ns}/clusterserviceversions/demo-operator.v1.0.0")["status"]["phase"] == "Succeeded"

        run = run_playbook(play(kubeconfig, [op]))
        assert run.rc == 0, run.output
        assert run.changed_tasks() == [], run.changed_tasks()
        assert role_tasks(run, "failed") == []


def test_manual_approval_only_of_the_starting_csv(run_playbook, kube_api: KubeApi, kubeconfig):
    ns = unique("olm-manual")
    op = {"name": "pinned-operator", "namespace": ns, "install_plan_approval": "Manual",
          "starting_csv": "pinned-operator.v1.2.0", "target": "all"}
    with FakeOlm(kube_api, ns):
        # Without approve: said, nothing approved, the CSV not waited for.
        run = run_playbook(play(kubeconfig, [op]))
        assert run.rc == 0, run.output
        assert "waits for your approval" in run.output
        plan = f"{OPS}/{ns}/installplans/install-pinned-operator"
        assert kube_api.get(plan)["spec"]["approved"] is False
        assert kube_api.get(f"{GROUPS}/{ns}/operatorgroups/{ns}")["spec"].get("targetNamespaces") is None

        run = run_playbook(play(kubeconfig, [{**op, "approve": True}]))
        assert run.rc == 0, run.output
        assert changed(run) == ["Approve the InstallPlan of pinned-operator.v1.2.0"]
        approved = kube_api.get(plan)
        assert approved["spec"]["approved"] is True
        assert any(m["manager"] == "proxshift" for m in approved["metadata"]["managedFields"])
        assert kube_api.get(f"{plan}-upgrade")["spec"]["approved"] is False
        assert kube_api.get(f"{OPS}/{ns}/clusterserviceversions/pinned-operator.v1.2.0")["status"]["phase"] == "Succeeded"

        # Installed; OLM now offers v9 in a pending plan: the rerun approves nothing and changes nothing.
        assert kube_api.get(f"{OPS}/{ns}/subscriptions/pinned-operator")["status"]["currentCSV"] == "pinned-operator.v9.0.0"
        run = run_playbook(play(kubeconfig, [{**op, "approve": True}]))
        assert run.rc == 0, run.output
        assert run.changed_tasks() == [], run.changed_tasks()
        assert kube_api.get(f"{plan}-upgrade")["spec"]["approved"] is False


def test_missing_catalog_and_unknown_channel_fail_naming_the_condition(run_playbook, kube_api: KubeApi, kubeconfig):
    ns = unique("olm-bad")
    op = {"name": "demo-operator", "namespace": ns, "source": MISSING_SOURCE, "timeout": 2}
    with FakeOlm(kube_api, ns):
        run = run_playbook(play(kubeconfig, [op]))
        assert run.rc != 0
        failed = role_tasks(run, "failed")
        assert failed == [f"{ROLE} : Check that the Subscription resolved"], failed
        msg = run.task(failed[0])["msg"]
        assert f"Subscription {ns}/demo-operator" in msg and f"CatalogSource openshift-marketplace/{MISSING_SOURCE}" in msg, msg
        assert (f"CatalogSourcesUnhealthy=True (UnhealthyCatalogSourceFound: targeted catalogsource "
                f"openshift-marketplace/{MISSING_SOURCE} missing)") in msg, msg

        run = run_playbook(play(kubeconfig, [{**op, "source": "redhat-operators", "channel": UNKNOWN_CHANNEL}]))
        assert run.rc != 0
        msg = run.task(f"{ROLE} : Check that the Subscription resolved")["msg"]
        assert "ResolutionFailed=True (ConstraintsNotSatisfiable: constraints not satisfiable: no operators found in " \
               f"channel {UNKNOWN_CHANNEL}" in msg, msg
        assert "CatalogSourcesUnhealthy" not in msg, msg

        # The fix: a channel the catalog has. The same Subscription is updated and resolves.
        run = run_playbook(play(kubeconfig, [{**op, "source": "redhat-operators", "channel": "stable", "timeout": 30}]))
        assert run.rc == 0, run.output
        assert kube_api.get(f"{OPS}/{ns}/clusterserviceversions/demo-operator.v1.0.0")["status"]["phase"] == "Succeeded"


def test_a_failed_csv_is_waited_through_as_olm_retries(run_playbook, kube_api: KubeApi, kubeconfig):
    """OLM retries a Failed CSV (transitionCSVState, CSVPhaseFailed): a first Failed is not the end."""
    ns = unique("olm-csvretry")
    with FakeOlm(kube_api, ns, csv_outcome="FailedOnce"):
        run = run_playbook(play(kubeconfig, [{"name": "flaky-operator", "namespace": ns}]))
        assert run.rc == 0, run.output
    phases = [e for e in kube_api.audit_events() if e["verb"] == "patch"
              and e["requestURI"].startswith(f"{OPS}/{ns}/clusterserviceversions/flaky-operator.v1.0.0/status")]
    assert len(phases) == 3, phases  # Failed, Installing (OLM's retry), Succeeded
    assert wait_result(run, "the ClusterServiceVersion")["results"][0]["object"]["status"]["phase"] == "Succeeded"


def test_failed_csv_fails_after_the_timeout_and_the_rerun_converges(run_playbook, kube_api: KubeApi, kubeconfig):
    ns = unique("olm-csvfail")
    op = {"name": "broken-operator", "namespace": ns, "timeout": 3}
    with FakeOlm(kube_api, ns, csv_outcome="Failed"):
        run = run_playbook(play(kubeconfig, [op]))
        assert run.rc != 0
        msg = run.task(f"{ROLE} : Check that the CSV succeeded")["msg"]
        assert msg == (f"ClusterServiceVersion {ns}/broken-operator.v1.0.0 failed: phase Failed (InstallCheckFailed: "
                       "install timeout: deployment demo-controller not available), still after 3s of OLM's retries. "
                       "Fix the cause and run again."), msg

    # OLM retries after the fix and the CSV succeeds: the rerun converges with nothing to change.
    path = f"{OPS}/{ns}/clusterserviceversions/broken-operator.v1.0.0"
    kube_api.patch_status(path, SUCCEEDED)
    run = run_playbook(play(kubeconfig, [op]))
    assert run.rc == 0, run.output
    assert run.changed_tasks() == [], run.changed_tasks()


def test_an_existing_operator_group_is_used_or_refused(run_playbook, kube_api: KubeApi, kubeconfig):
    """OLM allows one OperatorGroup per namespace: one the namespace has (as openshift-operators has
    global-operators) is used when its target fits, and refused before any change when it does not."""
    ns = unique("olm-global")
    kube_api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kube_api.ok("POST", f"{GROUPS}/{ns}/operatorgroups", {"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                                                         "metadata": {"name": "global-operators", "namespace": ns}, "spec": {}})
    op = {"name": "demo-operator", "namespace": ns}
    run = run_playbook(play(kubeconfig, [op]))
    assert run.rc != 0
    msg = run.task(f"{ROLE} : Check that the namespace's OperatorGroup fits")["msg"]
    assert f"Namespace {ns} already has OperatorGroup global-operators" in msg and "Nothing was changed" in msg, msg
    assert kube_api.get(f"{OPS}/{ns}/subscriptions/demo-operator") is None

    with FakeOlm(kube_api, ns):
        run = run_playbook(play(kubeconfig, [{**op, "target": "all"}]))
        assert run.rc == 0, run.output
    assert [g["metadata"]["name"] for g in kube_api.get(f"{GROUPS}/{ns}/operatorgroups")["items"]] == ["global-operators"]
    assert kube_api.get(f"{OPS}/{ns}/subscriptions/demo-operator")["spec"]["installPlanApproval"] == "Automatic"


def test_a_misspelt_or_incomplete_operator_entry_is_refused_before_any_call(run_playbook, tmp_path):
    """The role's argument check: an unknown key (a typo) or a missing namespace fails before any API call
    (the kubeconfig does not even exist)."""
    run = run_playbook(play(tmp_path / "absent", [{"name": "demo-operator", "namespace": "demo", "chanel": "stable"},
                                                  {"name": "other-operator"}]))
    assert run.rc != 0
    errors = [e for r in run.results for e in r["result"].get("argument_errors", [])]
    assert "missing required arguments: namespace found in post_install_operators" in errors, errors
    assert any(e.startswith("post_install_operators.chanel. Supported parameters include") for e in errors), errors
    assert not any(r["action"] == "proxshift.openshift.cluster_config" for r in run.results)
