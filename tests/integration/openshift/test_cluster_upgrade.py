"""proxshift.openshift.cluster_upgrade against a real kube-apiserver (the ClusterVersion and ClusterOperator CRDs
of openshift/api loaded), the test playing the cluster-version operator (tests/standins/cvo.py). The module
authenticates as `kc-admin`, the test and the fake operator as `admin`: what the module wrote is read from the
API server's audit log by that user."""
from __future__ import annotations

import json

import pytest

from standins.cvo import CO, CV, MCP, Audit, FakeCVO, conditions, image, releases, replace_status
from kube_fixtures import KubeApi, condition, kube_api  # noqa: F401 (fixtures)

OPERATORS = ["etcd", "kube-apiserver", "dns"]
CLUSTER_ID = "6c1f5a2e-0000-4000-8000-00000000a9de"
MODULE_USER = "kc-admin"


@pytest.fixture
def cluster(kube_api: KubeApi):
    """An OpenShift cluster at 4.18.5 on stable-4.18 with three healthy operators; the ClusterVersion and
    ClusterOperators found before (other tests of the session) are put back afterwards."""
    saved_cv = kube_api.get(f"{CV}/version")
    saved_ops = kube_api.ok("GET", CO)["items"]

    def clear():
        for op in kube_api.ok("GET", CO)["items"]:
            kube_api.ok("DELETE", f"{CO}/{op['metadata']['name']}")
        if kube_api.get(f"{CV}/version") is not None:
            kube_api.ok("DELETE", f"{CV}/version")

    def put(path: str, obj: dict) -> None:
        meta = {k: v for k, v in obj["metadata"].items() if k in ("name", "labels", "annotations")}
        kube_api.ok("POST", path, {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta,
                                   "spec": obj.get("spec", {})})
        if obj.get("status"):
            kube_api.patch_status(f"{path}/{meta['name']}", obj["status"])

    clear()
    put(CV, {"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
             "spec": {"clusterID": CLUSTER_ID, "channel": "stable-4.18"},
             "status": {"desired": {"version": "4.18.5", "image": image("4.18.5")}, "observedGeneration": 1,
                        "versionHash": "x", "availableUpdates": [],
                        "history": [{"state": "Completed", "version": "4.18.5", "image": image("4.18.5"),
                                     "verified": False, "startedTime": "2026-01-01T00:00:00Z",
                                     "completionTime": "2026-01-01T01:00:00Z"}],
                        "conditions": conditions()}})
    for name in OPERATORS:
        put(CO, {"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": {"name": name},
                 "spec": {}, "status": {"versions": [{"name": "operator", "version": "4.18.5"}],
                                        "conditions": [condition("Available", "True"), condition("Progressing", "False"),
                                                       condition("Degraded", "False")]}})
    yield kube_api
    clear()
    if saved_cv:
        put(CV, saved_cv)
    for op in saved_ops:
        put(CO, op)


@pytest.fixture
def cvo(cluster: KubeApi):
    """Start the fake operator with the given offers per channel; stopped (and its errors raised) after."""
    started = []

    def start(offers: dict[str, list[dict]], **more) -> FakeCVO:
        started.append(FakeCVO(cluster, offers, module_user=MODULE_USER, token=cluster.admin_token, **more).ready())
        return started[-1]

    yield start
    for c in started:
        c.finish()


def args(api: KubeApi, **more) -> dict:
    return {"api_url": api.url, "api_key": api.kubeconfig_token, "ca_cert": api.ca_cert,
            "poll_interval": 1, "timeout": 120, **more}


def spec(api: KubeApi) -> dict:
    return api.get(f"{CV}/version")["spec"]


def play(*tasks: dict) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": list(tasks)}])


def test_minor_upgrade_through_a_new_channel_then_rerun_and_check_mode(run_playbook, cluster, cvo):
    fake = cvo({"stable-4.18": releases("4.18.7", "4.18.9"),
                "stable-4.19": releases("4.18.9", "4.19.1", "4.19.3", "4.19.2")})
    audit = Audit(cluster, MODULE_USER)
    before = len(audit.events())
    task = {"proxshift.openshift.cluster_upgrade": args(cluster, version="4.19")}

    check = run_playbook(play({"name": "path", **task, "check_mode": True, "diff": True}))
    assert check.rc == 0, check.output
    r = check.task("path")
    assert r["changed"] is True and r["from"] == "4.18.5", r
    assert r["channel"] == {"from": "stable-4.18", "to": "stable-4.19"}
    assert r["msg"] == "would upgrade 4.18.5 -> 4.19 (as the new channel offers it) (channel 'stable-4.18' -> 'stable-4.19')"
    assert audit.writes(before) == [], "check mode wrote"
    assert spec(cluster) == {"clusterID": CLUSTER_ID, "channel": "stable-4.18"}

    run = run_playbook(play({"name": "upgrade", **task}, {"name": "again", **task}))
    assert run.rc == 0, run.output
    r = run.task("upgrade")
    assert r["changed"] is True and (r["from"], r["to"], r["version"]) == ("4.18.5", "4.19.3", "4.19.3"), r
    assert r["channel"] == {"from": "stable-4.18", "to": "stable-4.19"}
    assert r["image"] == image("4.19.3")
    # Each state the operator went through was seen: not started, Partial with 0..3 operators, Completed.
    seen = [(p["history"], p["operators_updated"], p["operators_total"], p["done"]) for p in r["progress"]]
    assert seen[0] == ("4.18.5 Completed", 0, 3, False), seen
    assert ("4.19.3 Partial", 0, 3, False) in seen and ("4.19.3 Partial", 2, 3, False) in seen, seen
    assert seen[-1] == ("4.19.3 Completed", 3, 3, True), seen
    assert [u["version"] for u in fake.updates] == ["4.19.3"]
    s = spec(cluster)
    assert s["channel"] == "stable-4.19"
    assert s["desiredUpdate"] == {"version": "4.19.3", "image": image("4.19.3"), "force": False}
    # Two writes: the channel, then the desired update (merge patches, as oc adm upgrade).
    assert [w.split("?")[0] for w in audit.writes(before)] == [f"patch {CV}/version"] * 2
    again = run.task("again")
    assert again["changed"] is False and again["msg"] == "the cluster is at 4.19.3, as requested (4.19)", again
    assert len(audit.writes(before)) == 2
    assert cluster.kubeconfig_token not in run.output


def failed(run_module, api: KubeApi, **more) -> dict:
    audit = Audit(api, MODULE_USER)
    before = len(audit.events())
    out, rc, _ = run_module("cluster_upgrade", args(api, **more))
    assert rc != 0 and out.get("failed") is True, out
    assert audit.writes(before) == [], f"a refused upgrade wrote: {audit.writes(before)}"
    return out


def test_refusals_change_nothing(run_module, cluster, cvo):
    cvo({"stable-4.18": releases("4.18.7", "4.18.9"), "stable-4.19": releases("4.19.1")})
    original = spec(cluster)

    out = failed(run_module, cluster, version="4.18.8")
    assert out["msg"] == ("the update to 4.18.8 is not offered by channel 'stable-4.18' "
                          "(status.availableUpdates: 4.18.9, 4.18.7)"), out
    assert out["offered"] == ["4.18.9", "4.18.7"]

    out = failed(run_module, cluster, version="4.18.3")
    assert out["msg"] == ("refusing to lower the version: the cluster runs 4.18.5, 4.18.3 was requested "
                          "(downgrades are not supported)"), out
    assert "lower" in failed(run_module, cluster, version="4.17")["msg"]

    cluster.patch_status(f"{CO}/dns", {"conditions": [condition("Available", "True"), condition("Progressing", "False"),
                                                      condition("Degraded", "True", "2 of 3 pods crash-looping")]})
    out = failed(run_module, cluster, version="4.18.9")
    assert out["msg"] == ("the cluster is not healthy, not upgrading to 4.18.9: ClusterOperator dns Degraded=True "
                          "(Test: 2 of 3 pods crash-looping)"), out
    cluster.patch_status(f"{CO}/dns", {"conditions": [condition("Available", "True"), condition("Progressing", "False"),
                                                      condition("Degraded", "False")]})

    cluster.patch_status(f"{CV}/version", {"conditions": conditions(upgradeable="Kubernetes 1.32 removes APIs in use")})
    out = failed(run_module, cluster, version="4.19.1", channel="stable-4.19")
    assert out["msg"] == ("ClusterVersion Upgradeable=False (AdminAckRequired: Kubernetes 1.32 removes APIs in use): "
                          "a minor-version update from 4.18.5 to 4.19.1 is blocked (z-stream updates are allowed)"), out
    # A z-stream update is allowed while Upgradeable=False (check mode: the path, no write).
    audit = Audit(cluster, MODULE_USER)
    before = len(audit.events())
    out, rc, _ = run_module("cluster_upgrade", {**args(cluster, version="4.18.9"), "_ansible_check_mode": True})
    assert rc == 0 and out["changed"] is True and out["to"] == "4.18.9", out
    assert out["msg"] == "would upgrade 4.18.5 -> 4.18.9"
    assert audit.writes(before) == []
    cluster.patch_status(f"{CV}/version", {"conditions": conditions()})

    # An update to another version already under way.
    replace_status(cluster, {
        "desired": {"version": "4.18.7", "image": image("4.18.7")},
        "history": [{"state": "Partial", "version": "4.18.7", "image": image("4.18.7"), "verified": True,
                     "startedTime": "2026-01-02T00:00:00Z", "completionTime": None},
                    {"state": "Completed", "version": "4.18.5", "image": image("4.18.5"), "verified": False,
                     "startedTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-02T00:00:00Z"}],
        "conditions": conditions(progressing="Working towards 4.18.7: 106 of 863 done (12% complete)")})
    out = failed(run_module, cluster, version="4.18.9")
    assert out["msg"] == ("an update to 4.18.7 is already under way (ClusterVersion Progressing=True: Test: Working "
                          "towards 4.18.7: 106 of 863 done (12% complete)); wait for it to finish before requesting "
                          "4.18.9"), out
    assert spec(cluster) == original


def test_a_new_channel_that_does_not_offer_the_target_is_set_back(run_module, cluster, cvo):
    cvo({"stable-4.18": releases("4.18.9"), "stable-4.19": releases("4.19.1")})
    audit = Audit(cluster, MODULE_USER)
    before = len(audit.events())
    out, rc, _ = run_module("cluster_upgrade", args(cluster, version="4.19.2", refresh_polls=3))
    assert rc != 0, out
    assert out["msg"] == ("the update to 4.19.2 is not offered by channel 'stable-4.19' "
                          "(status.availableUpdates: 4.19.1)"), out
    assert out["channel_restored"] == "stable-4.18"
    assert spec(cluster) == {"clusterID": CLUSTER_ID, "channel": "stable-4.18"}
    # The channel, then the channel back: no desired update.
    assert len(audit.writes(before)) == 2
    # Three looks at the new channel (bounded by refresh_polls), after the first look of the decision.
    assert audit.count("get", "clusterversions", before) == 1 + 3


def test_a_rejected_payload_fails_fast(run_module, cluster, cvo):
    """The operator cannot verify the release (ReleaseAccepted=False): the module stops one poll after it sees
    that, naming the operator's message, instead of waiting out its timeout."""
    failure = "The update cannot be verified: unable to verify sha256:0909 against keyrings: verifier-public-key-redhat"
    fake = cvo({"stable-4.18": releases("4.18.9")}, reject={"4.18.9": failure})
    out, rc, _ = run_module("cluster_upgrade", args(cluster, version="4.18.9", timeout=3600))
    assert rc != 0 and out["changed"] is True, out
    assert out["msg"].startswith("the update to 4.18.9 stopped: the cluster-version operator did not accept the "
                                 "release (ReleaseAccepted=False, RetrievePayload: Retrieving payload failed "
                                 'version="4.18.9"'), out["msg"]
    assert failure in out["msg"]
    assert [u["version"] for u in fake.updates] == ["4.18.9"]


def test_a_failing_update_stops_one_poll_after_it_is_seen(run_module, cluster, cvo):
    """An operator degrades during the update and the ClusterVersion turns Failing=True (the CVO has already
    waited out its own grace before saying so: the operator has been Degraded=True for over 40 minutes, past
    `oc adm upgrade status`'s error threshold): the module stops, naming the operator, and returns the progress
    it saw; the update it asked for stays asked (nothing is rolled back)."""
    fake = cvo({"stable-4.18": releases("4.18.9")}, degrade={"4.18.9": "kube-apiserver"})
    out, rc, _ = run_module("cluster_upgrade", args(cluster, version="4.18.9", timeout=3600))
    assert rc != 0 and out["changed"] is True, out
    assert out["msg"] == ("the update to 4.18.9 stopped: the update is failing (ClusterVersion Failing=True, "
                          "ClusterOperatorDegraded: Cluster operator kube-apiserver is degraded)"), out
    assert out["progress"] and [u["version"] for u in fake.updates] == ["4.18.9"], out
    assert spec(cluster)["desiredUpdate"]["version"] == "4.18.9"


def test_a_conditional_target_is_refused_with_its_risks_then_accepted(run_module, cluster, cvo):
    risk = {"name": "OVNDrop", "message": "Pods on OVN-Kubernetes can lose traffic after the update.",
            "url": "https://issues.redhat.com/browse/OCPBUGS-0000", "matchingRules": [{"type": "Always"}]}
    recommended = {"type": "Recommended", "status": "False", "reason": "OVNDrop", "message": risk["message"],
                   "lastTransitionTime": "2026-01-01T00:00:00Z"}
    conditional = [{"release": releases("4.18.9")[0], "risks": [risk], "conditions": [recommended]}]
    cvo({"stable-4.18": releases("4.18.7")}, conditional={"stable-4.18": conditional})
    out = failed(run_module, cluster, version="4.18.9")
    assert out["msg"] == ("4.18.9 is not recommended for this cluster (status.conditionalUpdates): OVNDrop: Pods on "
                          "OVN-Kubernetes can lose traffic after the update. (https://issues.redhat.com/browse/OCPBUGS-0000); "
                          "accept every risk by name in accept_risks to update anyway (not accepted: OVNDrop)"), out
    out, rc, _ = run_module("cluster_upgrade", args(cluster, version="4.18.9", accept_risks=["OVNDrop"]))
    assert rc == 0 and out["changed"] is True and out["version"] == "4.18.9", out
    assert spec(cluster)["desiredUpdate"] == {"version": "4.18.9", "image": image("4.18.9"), "force": False}


def test_upgrade_path_auto_steps_through_the_channels_updates(run_module, cluster, cvo):
    """4.18.5 -> 4.19: the channel's graph leads through 4.18.9 only (no edge from 4.18.5 to a 4.19). With
    upgrade_path auto the module updates to 4.18.9, waits for it, checks the cluster again, then goes on to the
    newest 4.19 offered from there."""
    fake = cvo({"stable-4.18": {"4.18.5": releases("4.18.9")},
                "stable-4.19": {"4.18.5": releases("4.18.9"), "4.18.9": releases("4.19.1", "4.19.3")}})
    out, rc, _ = run_module("cluster_upgrade", args(cluster, version="4.19", upgrade_path="auto", refresh_polls=3))
    assert rc == 0, out
    assert out["changed"] is True and out["hops"] == ["4.18.9"] and out["version"] == "4.19.3", out
    assert out["msg"] == "upgraded 4.18.5 -> 4.18.9 -> 4.19.3 (upgrade_path auto)", out
    assert [u["version"] for u in fake.updates] == ["4.18.9", "4.19.3"]
    assert spec(cluster)["channel"] == "stable-4.19"


def test_a_transient_failure_mid_update_is_waited_out(run_module, cluster, cvo):
    """An operator is briefly Available=False mid-update and the CVO says Failing=True for a few looks, then its
    retry clears it: the update goes on and completes (judged as `oc adm upgrade status` does, by how long and
    whether the CVO still progresses), the failure it saw kept in the progress. ReleaseAccepted goes from
    Unknown (retrieving the payload) to True on the way."""
    fake = cvo({"stable-4.18": releases("4.18.9")}, flap={"4.18.9": "kube-apiserver"})
    out, rc, _ = run_module("cluster_upgrade", args(cluster, version="4.18.9", timeout=3600))
    assert rc == 0 and out["changed"] is True and out["version"] == "4.18.9", out
    failing = [p["failing"] for p in out["progress"] if p["failing"]]
    assert failing and "ClusterOperatorNotAvailable: Cluster operator kube-apiserver is not available" in failing[0], out
    assert [u["version"] for u in fake.updates] == ["4.18.9"]


def test_upgrade_path_auto_waits_for_the_pools_between_hops(run_module, cluster, cvo):
    """After the hop to 4.18.9 the machine config pools roll it onto the nodes: the machine-config operator, then
    the ClusterVersion, say Upgradeable=False (PoolUpdating), which refuses the minor hop to 4.19. The module waits
    for them, then goes on."""
    fake = cvo({"stable-4.18": {"4.18.5": releases("4.18.9")},
                "stable-4.19": {"4.18.5": releases("4.18.9"), "4.18.9": releases("4.19.3")}}, pools_roll=True)
    out, rc, _ = run_module("cluster_upgrade", args(cluster, version="4.19", upgrade_path="auto", refresh_polls=3))
    assert rc == 0, out
    assert out["hops"] == ["4.18.9"] and out["version"] == "4.19.3", out
    assert [u["version"] for u in fake.updates] == ["4.18.9", "4.19.3"]


def test_a_lost_lease_ends_the_wait_and_leaves_the_update_to_the_cluster(run_module, cluster, cvo, tmp_path):
    """#43: the playbooks' lease keeper writes PROXSHIFT_STOP_FILE once the run lost the cluster's lease (another
    run may hold it). The module asks for the update, then stops following it at its next look instead of waiting
    out its timeout: the update itself goes on in the cluster (nothing is rolled back), and the message says so
    and why."""
    lost = tmp_path / "lease-lost"
    lost.write_text("this run (run r1) lost the lease of lab-a: held by run r2 on host ctl2\n")
    fake = cvo({"stable-4.18": releases("4.18.9")}, flap={"4.18.9": "kube-apiserver"})
    out, rc, _ = run_module("cluster_upgrade", args(cluster, version="4.18.9", timeout=3600),
                            env={"PROXSHIFT_STOP_FILE": str(lost)})
    assert rc != 0 and out["changed"] is True, out
    assert out["msg"].startswith("no longer following the update to 4.18.9 (it goes on in the cluster): stopped "
                                 "after "), out["msg"]
    assert "this run (run r1) lost the lease of lab-a: held by run r2 on host ctl2 (still waiting for: " in out["msg"]
    assert spec(cluster)["desiredUpdate"]["version"] == "4.18.9"
    assert [u["version"] for u in fake.updates] == ["4.18.9"]
    # The rerun (empty variable: the playbooks set it so when no keeper runs) follows the same update to its end.
    out, rc, _ = run_module("cluster_upgrade", args(cluster, version="4.18.9", timeout=3600),
                            env={"PROXSHIFT_STOP_FILE": ""})
    assert rc == 0 and out["version"] == "4.18.9", out
    assert [u["version"] for u in fake.updates] == ["4.18.9"]


@pytest.fixture
def machine_pools(cluster: KubeApi):
    """The master and worker MachineConfigPools (3 machines each, all updated), and an `infra` pool an
    administrator paused; removed afterwards."""
    names = {"master": False, "worker": False, "infra": True}
    for name, paused in names.items():
        cluster.ok("POST", MCP, {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                                 "metadata": {"name": name}, "spec": {"paused": paused}})
        generation = cluster.get(f"{MCP}/{name}")["metadata"]["generation"]
        cluster.patch_status(f"{MCP}/{name}", {
            "observedGeneration": generation, "machineCount": 3, "updatedMachineCount": 3, "readyMachineCount": 3,
            "unavailableMachineCount": 0, "degradedMachineCount": 0,
            "conditions": [condition("Updated", "True"), condition("Updating", "False")]})
    yield cluster
    for name in names:
        cluster.request("DELETE", f"{MCP}/{name}")


def test_an_eus_to_eus_update_pauses_the_workers_for_its_hops_and_resumes_them_once(run_module, machine_pools, cvo):
    """#44: 4.18 -> 4.20 through 4.19 the Control Plane Only way (OpenShift's EUS-to-EUS procedure): the worker pool is
    paused before the first hop and stays so for both, the control plane takes each release, then the worker pool
    is resumed and waited for: the workers go from 4.18.5 to 4.20.1 in one roll. The pool an administrator paused is
    neither resumed nor marked. Check mode says so first and writes nothing."""
    cluster = machine_pools
    offers = {"stable-4.18": {"4.18.5": releases("4.18.9")},
              "stable-4.20": {"4.18.5": releases("4.19.3"), "4.19.3": releases("4.20.1")}}
    fake = cvo(offers, pools_roll=True)
    check, rc, _ = run_module("cluster_upgrade", {**args(cluster, version="4.20", upgrade_path="auto", refresh_polls=3),
                                                  "_ansible_check_mode": True, "_ansible_diff": True})
    assert rc == 0 and check["changed"] is True, check
    assert (check["paused_pools"], check["resumed_pools"]) == (["worker"], ["worker"]), check
    pool_diffs = [d for d in check["diff"] if d["before_header"] == "MachineConfigPool worker"]
    assert [(d["before"], d["after"]) for d in pool_diffs] == [({"spec": {"paused": False}}, {"spec": {"paused": True}})]
    assert cluster.get(f"{MCP}/worker")["spec"]["paused"] is False and fake.updates == []

    out, rc, _ = run_module("cluster_upgrade", args(cluster, version="4.20", upgrade_path="auto", refresh_polls=3))
    assert rc == 0, (out["msg"], fake.pool_versions)
    assert out["hops"] == ["4.19.3"] and out["version"] == "4.20.1", out
    assert (out["paused_pools"], out["resumed_pools"]) == (["worker"], ["worker"]), out
    assert [u["version"] for u in fake.updates] == ["4.19.3", "4.20.1"]
    assert fake.paused_at == {v: {"master": False, "worker": True, "infra": True} for v in ("4.19.3", "4.20.1")}
    assert fake.pool_versions["master"] == ["4.18.5", "4.19.3", "4.20.1"], fake.pool_versions
    assert fake.pool_versions["worker"] == ["4.18.5", "4.20.1"], fake.pool_versions
    worker, infra = cluster.get(f"{MCP}/worker"), cluster.get(f"{MCP}/infra")
    assert worker["spec"]["paused"] is False and "proxshift.io/paused-for-update" not in (
        worker["metadata"].get("annotations") or {}), worker["metadata"]
    assert worker["status"]["updatedMachineCount"] == 3
    assert infra["spec"]["paused"] is True and not infra["metadata"].get("annotations"), infra["metadata"]


def test_an_eus_update_stopped_after_pausing_says_so_and_the_rerun_resumes_the_workers(run_module, machine_pools, cvo,
                                                                                       tmp_path):
    """The run that paused the worker pool loses its lease in its first wait: it fails naming the paused pool (a
    changed failure, the pool left paused and marked); the rerun takes the update to 4.20 and resumes that pool,
    and only it."""
    cluster = machine_pools
    offers = {"stable-4.18": {"4.18.5": releases("4.18.9")},
              "stable-4.20": {"4.18.5": releases("4.19.3"), "4.19.3": releases("4.20.1")}}
    fake = cvo(offers, pools_roll=True)
    lost = tmp_path / "lease-lost"
    lost.write_text("this run lost the lease of the cluster\n")
    out, rc, _ = run_module("cluster_upgrade", args(cluster, version="4.20", upgrade_path="auto", refresh_polls=3),
                            env={"PROXSHIFT_STOP_FILE": str(lost)})
    assert rc != 0 and out["changed"] is True and out["paused_pools"] == ["worker"], out
    assert "the worker pools paused for this update (worker) stay paused: a rerun goes on" in out["msg"], out["msg"]
    worker = cluster.get(f"{MCP}/worker")
    assert worker["spec"]["paused"] is True and "proxshift.io/paused-for-update" in worker["metadata"]["annotations"]
    # It stopped in its first wait (for the cluster's view of the updates): no release asked for yet.
    assert "desiredUpdate" not in spec(cluster) and fake.updates == [], spec(cluster)

    out, rc, _ = run_module("cluster_upgrade", args(cluster, version="4.20", upgrade_path="auto", refresh_polls=3),
                            env={"PROXSHIFT_STOP_FILE": ""})
    assert rc == 0 and out["version"] == "4.20.1" and out["resumed_pools"] == ["worker"], out
    assert [u["version"] for u in fake.updates] == ["4.19.3", "4.20.1"]
    assert fake.pool_versions["worker"] == ["4.18.5", "4.20.1"], fake.pool_versions
    worker, infra = cluster.get(f"{MCP}/worker"), cluster.get(f"{MCP}/infra")
    assert worker["spec"]["paused"] is False and "proxshift.io/paused-for-update" not in (
        worker["metadata"].get("annotations") or {}), worker["metadata"]
    assert infra["spec"]["paused"] is True
