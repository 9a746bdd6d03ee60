"""Each phase of site.yaml alone (`--tags PHASE`, as the README promises), and the proxshift verbs that map
to tags: on a provisioned cluster each changes nothing; on a fresh one each either works or names the
phase to run first (issue #22 item 6).

lab-sno is provisioned once for the module — every phase, with the installer double, OpenBao, one
kube-apiserver playing the cluster and another the ACM hub (importing the hub into itself is refused) —
and each tag runs against it. lab-compact stays fresh: nothing of it exists on Proxmox, and each fresh run
gets an empty work folder of its own. lab-gitops (inventory/gitops.yml) is never installed: `site.yaml --check --diff`
on it writes nothing to pvesim, OpenBao (its audit log) or the hub (the apiserver's audit log).
"""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from standins.cvo import CV, FakeCVO, releases
from kube_fixtures import (KubeApi, event_message, external_secret, external_secrets_controller, kube_api,  # noqa: F401 (fixtures)
                           condition, ready_condition, spoke_api)
from standins.eso import FakeEsoOperator
from standins.gitops import FakeGitOps
from standins.node_debug import BackupNodes
from standins.olm import FakeOlm
from services import DEMO_SEED, S3_ACCESS_KEY, S3_SECRET_CANARY, pvesim_bin, running_openbao, running_pvesim, running_s3
from test_full_install import make_cluster_ready
from testlib import REPO, ansible_env

PROVISIONED = "lab-sno"
FRESH = "lab-compact"
# site.yaml's phases in order, each with the phase a fresh cluster must run first (None: it works alone).
FRESH_NEEDS = {
    "preflight": None, "secrets": None, "manifests": None, "iso": None,
    "vms": "iso", "start": "vms", "install": "iso", "credentials": "install", "acm": "install",
    "post": "install", "external_secrets": "install", "gitops": "install",
    "upgrade": "install",
}
PHASE_CHECK = "Phases — stop when an earlier phase has not run"


@pytest.fixture(scope="module")
def site(request, tmp_path_factory):
    """The flow conftest's Site, for the whole module (overrides its per-test `site`, so `run_flow`
    runs every test against the same simulator, OpenBao and work folder)."""
    flow = request.config.pluginmanager.get_plugin(str(Path(__file__).resolve().with_name("conftest.py")))
    tmp = tmp_path_factory.mktemp("phases-alone")
    (tmp / "sim").mkdir()
    (tmp / "bao").mkdir()
    with running_pvesim(tmp / "sim", seed=DEMO_SEED) as sim, running_openbao(tmp / "bao", audit=True) as bao:
        bao.kv_put("openshift/pull-secret", {"pullSecret": flow.CANARY_PULL_SECRET})
        bao.kv_put("openshift/ssh", {"publicKey": flow.SSH_KEY})
        yield flow.Site(sim=sim, bao=bao, work=tmp / "work")


@pytest.fixture(scope="module")
def hub(kube_api: KubeApi, tmp_path_factory):  # noqa: F811
    """The ACM hub's kubeconfig."""
    kubeconfig = tmp_path_factory.mktemp("hub") / "hub.kubeconfig"
    kubeconfig.write_text(kube_api.kubeconfig(kube_api.admin_token))
    return kubeconfig


@pytest.fixture(scope="module")
def cluster_kubeconfig(spoke_api: KubeApi, tmp_path_factory):  # noqa: F811
    """The installed cluster's kubeconfig, which the installer double hands out."""
    kubeconfig = tmp_path_factory.mktemp("cluster") / "cluster.kubeconfig"
    kubeconfig.write_text(spoke_api.kubeconfig(spoke_api.admin_token))
    return kubeconfig


@pytest.fixture
def flow(run_flow, hub: Path, cluster_kubeconfig: Path, spoke_api: KubeApi):  # noqa: F811
    """run_flow with the installer double, the hub and a ready cluster."""
    make_cluster_ready(spoke_api, ["lab-sno-0"])

    def run(cluster: str, *, tags: str | None = None, extra: dict | None = None, **kwargs):
        return run_flow("site.yaml", cluster, with_installer=True, tags=tags,
                        extra={"acm_hub_kubeconfig": str(hub), "acm_wait": False, **(extra or {})},
                        env_more={"PROXSHIFT_TEST_KUBECONFIG": str(cluster_kubeconfig)}, **kwargs)

    return run


def vmgenids(site, cluster: str) -> dict:
    return {vm["vmid"]: vm["config"]["vmgenid"] for vm in site.owned_vms(cluster)}


@pytest.fixture
def provisioned(flow, site, kube_api: KubeApi) -> dict:  # noqa: F811
    """lab-sno through every phase, once per module; returns its VMs' vmgenids."""
    state = site.__dict__.setdefault("phases_alone", {})
    if "vmgenids" not in state:
        first = flow(PROVISIONED)
        assert first.rc == 0, first.output
        assert site.record(PROVISIONED)["phase"] == "imported"
        assert site.bao.kv_get(f"openshift/clusters/{PROVISIONED}")["api"].startswith("https://api.lab-sno.")
        assert kube_api.get(f"/apis/cluster.open-cluster-management.io/v1/managedclusters/{PROVISIONED}")
        state["vmgenids"] = vmgenids(site, PROVISIONED)
        assert len(state["vmgenids"]) == 1
    return state["vmgenids"]


def recap_changed(output: str) -> int:
    found = re.search(r"^localhost\s+:.*\bchanged=(\d+)", output, re.M)
    assert found, output
    return int(found.group(1))


@pytest.mark.parametrize("phase", list(FRESH_NEEDS))
def test_each_phase_alone_on_a_provisioned_cluster_changes_nothing(phase, flow, site, provisioned):
    seq = site.sim.last_seq()
    run = flow(PROVISIONED, tags=phase)
    assert run.rc == 0, run.output
    assert recap_changed(run.output) == 0 and run.changed_tasks() == [], run.changed_tasks()
    assert site.sim.writes_since(seq) == []
    assert vmgenids(site, PROVISIONED) == provisioned
    assert site.canary not in run.output


@pytest.fixture
def fresh_record(site):
    """lab-compact has no record in Vault: an `iso` run before this test recorded its build (phase
    installing), which would make the next run restore that build instead of starting fresh."""
    status, body = site.bao.api("DELETE", f"secret/metadata/openshift/clusters/{FRESH}")
    assert status in (204, 404), body
    assert site.record(FRESH) is None


@pytest.mark.parametrize("phase", list(FRESH_NEEDS))
def test_each_phase_alone_on_a_fresh_cluster_works_or_names_the_phase_to_run_first(phase, flow, site, tmp_path,
                                                                                  fresh_record):
    work = tmp_path / "fresh-work"
    run = flow(FRESH, tags=phase, extra={"proxshift_work_dir": str(work)})
    needs = FRESH_NEEDS[phase]
    if needs is None:
        assert run.rc == 0, run.output
    else:
        assert run.rc != 0
        failed = [r["task"] for r in run.results if r["status"] == "failed"]
        assert failed == [PHASE_CHECK], run.output
        assert f"Phase {phase} needs phase {needs} first" in run.output, run.output
        assert f"Run `site.yaml --tags {needs}` first" in run.output, run.output
        assert "is undefined" not in run.output
    assert site.owned_vms(FRESH) == [], "a phase alone created VMs on a fresh cluster"
    if phase in ("manifests", "iso"):
        # The manifests task builds the ISO too (it carries both tags).
        assert (work / FRESH / "agent" / "agent.x86_64.iso").is_file()


def test_vms_after_iso_attach_the_built_iso(flow, run_flow, site, tmp_path, fresh_record):
    """The vms phase alone finds the ISO an earlier iso run built; start alone then boots the VMs; a
    second vms run changes nothing."""
    work = {"proxshift_work_dir": str(tmp_path / "work")}
    assert flow(FRESH, tags="iso", extra=work).rc == 0
    try:
        vms = flow(FRESH, tags="vms", extra=work)
        assert vms.rc == 0, vms.output
        owned = site.owned_vms(FRESH)
        assert len(owned) == 3 and all("iso" in vm["config"].get("ide2", "") for vm in owned), owned
        assert not any(vm["running"] for vm in owned)
        start = flow(FRESH, tags="start", extra=work)
        assert start.rc == 0, start.output
        # lab-compact's IPs come from its ip_pool: only the rendered agent config knows which node is first.
        found = start.task("Phases — find the rendezvous host in the rendered agent config")
        assert found["ansible_facts"]["manifests_rendezvous_host"] == "lab-compact-0", found
        assert all(vm["running"] for vm in site.owned_vms(FRESH))
        again = flow(FRESH, tags="vms", extra=work)
        assert again.rc == 0 and again.changed_tasks() == [], again.changed_tasks()
    finally:
        # Fresh again for the tests after this one.
        gone = run_flow("deprovision.yaml", FRESH, extra=work)
        assert gone.rc == 0 and site.owned_vms(FRESH) == [], gone.output


NEVER_INSTALLED = "lab-gitops"


def test_check_diff_on_a_never_installed_cluster_predicts_every_phase_and_writes_nothing(flow, site, kube_api: KubeApi,  # noqa: F811
                                                                                        tmp_path):
    """inventory/gitops.yml's lab-gitops as it comes (External Secrets and GitOps enabled), with post-install
    configuration and the module's ACM hub, never installed: nothing of it on Proxmox, no record in Vault, no
    kubeconfig. `site.yaml --check --diff` exits 0 and writes nothing: no POST/PUT/DELETE in pvesim's request
    log, no write in OpenBao's audit log, no write verb from the modules in the hub's audit log (a server-side
    dry run is no write). Each phase after the install, which has no kubeconfig to work with, says what it would
    do; the hub's part reads the hub and reports what it would create there."""
    lab = yaml.safe_load((REPO / "inventory" / "gitops.yml").read_text())
    # The repository credentials are read and checked even before the cluster exists (a missing path fails the check).
    site.bao.kv_put(lab["all"]["children"]["clusters"]["children"][NEVER_INSTALLED]["vars"]["gitops"]["repo_credentials_vault_path"],
                    {"username": "git", "password": "lab-repo-password"})
    seq, vault_seen, hub_seen = site.sim.last_seq(), len(site.bao.audit_requests()), len(kube_api.audit_events())
    assert site.record(NEVER_INSTALLED) is None and site.owned_vms(NEVER_INSTALLED) == []
    run = flow(NEVER_INSTALLED, check=True, diff=True, extra={
        "proxshift_work_dir": str(tmp_path / "work"),
        "post_install_storage_classes": [{"name": "lab-nfs", "provisioner": "nfs.csi.k8s.io"}],
        "post_install_default_storage_class": "lab-nfs",
        "post_install_operators": [{"name": "local-storage-operator", "namespace": "openshift-local-storage"}]})
    assert run.rc == 0, run.output[-6000:]
    assert site.sim.writes_since(seq) == []
    assert site.bao.writes(vault_seen) == []
    time.sleep(0.5)  # the audit log is written after the response
    hub_writes = [(e["verb"], e["requestURI"]) for e in kube_api.audit_events()[hub_seen:]
                  if e["user"]["username"] == "admin" and e["verb"] in ("create", "update", "patch", "delete")
                  and "dryRun=All" not in e["requestURI"]]
    assert hub_writes == [], hub_writes
    assert site.record(NEVER_INSTALLED) is None and site.owned_vms(NEVER_INSTALLED) == []
    assert not (tmp_path / "work" / NEVER_INSTALLED / "agent" / "auth").exists()
    # Each phase without a kubeconfig says what it would do.
    for task, says in [("install_wait : Say what check mode would wait for", "would wait for the installer's bootstrap-complete"),
                       ("cluster_ready : Say why readiness is not checked", "would log in and wait until api"),
                       ("post_install : Say why the post-install configuration is not applied", "apply the StorageClasses lab-nfs"),
                       ("external_secrets : Say why the External Secrets Operator is not configured",
                        "would install the External Secrets Operator for Red Hat OpenShift through OLM"),
                       ("gitops : Say why GitOps is not bootstrapped", "so no root Application on the cluster"),
                       ("gitops : Say where the cluster stands on the hub", "the hub has no ManagedCluster lab-gitops yet")]:
        msg = run.task(f"proxshift.openshift.{task}")["msg"]
        assert msg.startswith("Check mode") and says in msg, (task, msg)
    # The hub: the import predicted from the hub alone, the GitOps objects dry-run or predicted.
    imported = run.task("proxshift.openshift.acm : Import into or detach from the ACM hub")
    assert imported["msg"] == f"{NEVER_INSTALLED} would be imported or updated on the hub", imported
    assert [a["action"] for a in imported["actions"]] == [
        "created", "would be created from the cluster's kubeconfig once the install writes it", "created", "created"], imported
    hub = [r for task in ("Register the cluster set with the hub's Argo CD, default",
                          "Apply the hub's ApplicationSet for the set's clusters, openshift-gitops/default-gitops")
           for r in run.task(f"proxshift.openshift.gitops : {task}")["results"]]
    assert [(r["kind"], r["action"]) for r in hub] == [(k, "created") for k in (
        "ManagedClusterSet", "ManagedClusterSetBinding", "Placement", "GitOpsCluster", "ConfigMap", "ApplicationSet")], hub
    notes = {r["kind"]: r.get("note") or "" for r in hub}
    assert notes["ManagedClusterSet"] == "", notes  # served and cluster-scoped: the server's dry run
    assert notes["ApplicationSet"].startswith("would create (kind not served yet: installed by OpenShift GitOps on the hub"), notes


# ------------------------------------------------------------------------------ proxshift verbs

def proxshift(site, tmp_path: Path, *args: str, extra: dict) -> tuple[int, dict, str]:
    """Run the built `proxshift` with --json against the module's site; returns (rc, report, stderr)."""
    binary = pvesim_bin().parent / "proxshift"
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: run `make build` (it builds proxshift next to pvesim)")
    env = ansible_env(tmp_path, site.env(with_installer=True))
    # proxshift adds its own phase callback; the test recorder is not needed here.
    for k in ("ANSIBLE_CALLBACK_PLUGINS", "ANSIBLE_CALLBACKS_ENABLED"):
        env.pop(k, None)
    proc = subprocess.run(
        [str(binary), "--json", "--project-dir", str(REPO), "-i", str(REPO / "inventory"), *args,
         "--", "-e", json.dumps(extra)],
        env=env, capture_output=True, text=True, timeout=900, cwd=str(tmp_path),
    )
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"no JSON report (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    assert site.canary not in proc.stdout + proc.stderr
    return proc.returncode, report, proc.stderr


def site_extra(site, cluster: str, hub: Path, **more) -> dict:
    return {**site.extra_vars(cluster), "acm_hub_kubeconfig": str(hub), "acm_wait": False, **more}


@pytest.mark.parametrize("verb", [["manifests"], ["acm-import"], ["provision", "--only", "vms"],
                                  ["provision", "--only", "start"]])
def test_cli_verbs_that_map_to_tags_change_nothing_on_a_provisioned_cluster(verb, site, hub, provisioned, tmp_path):
    rc, report, stderr = proxshift(site, tmp_path, verb[0], PROVISIONED, *verb[1:],
                                   extra=site_extra(site, PROVISIONED, hub))
    assert rc == 0 and report["status"] == "ok", stderr
    assert [r["changed"] for r in report["recap"]] == [0], report["recap"]
    assert vmgenids(site, PROVISIONED) == provisioned


@pytest.mark.parametrize("verb, needs", [(["acm-import"], "install"), (["provision", "--only", "start"], "vms")])
def test_cli_verbs_on_a_fresh_cluster_name_the_phase_to_run_first(verb, needs, site, hub, tmp_path, fresh_record):
    rc, report, stderr = proxshift(site, tmp_path, verb[0], FRESH, *verb[1:],
                                   extra=site_extra(site, FRESH, hub, proxshift_work_dir=str(tmp_path / "work")))
    assert rc != 0 and report["status"] == "failed", stderr
    messages = [f["message"] for f in report["failures"]]
    assert len(messages) == 1 and f"Run `site.yaml --tags {needs}` first" in messages[0], report["failures"]
    assert site.owned_vms(FRESH) == []


def test_phase_table_matches_the_tags_of_site_yaml():
    """playbooks/tasks/phase_order.yml decides which phases a run executes from the tags of the task doing
    each phase in site.yaml: the two must agree."""
    site_yaml = yaml.safe_load((REPO / "playbooks" / "site.yaml").read_text())[0]
    order = yaml.safe_load((REPO / "playbooks" / "tasks" / "phase_order.yml").read_text())
    table = order[0]["ansible.builtin.set_fact"]["proxshift_phase_table"]
    # The phases sit in the block that holds the cluster's lease (its `always` part releases it).
    tasks = [c for t in site_yaml["tasks"] for c in (t.get("block", []) + t.get("always", []) or [t])]
    tags_of_tasks = [sorted(t["tags"]) for t in tasks]
    for row in table:
        assert sorted(row["tags"]) in tags_of_tasks, row
    assert [row["phase"] for row in table] == list(FRESH_NEEDS)
    # A phase needs only earlier ones, or one read for it (secrets serves preflight).
    rows = {row["phase"]: (i, row) for i, row in enumerate(table)}
    for i, row in enumerate(table):
        for need in row["needs"]:
            before, needed = rows[need]
            assert before < i or row["phase"] in needed.get("read_for", []), row


def test_external_secrets_and_gitops_from_inventory_gitops_yml_check_first_then_real(
        run_flow, flow, site, hub, cluster_kubeconfig, provisioned, kube_api: KubeApi, spoke_api: KubeApi, tmp_path):  # noqa: F811
    """site.yaml's post, external_secrets and gitops phases with the settings of inventory/gitops.yml (only Vault's
    address is the test's OpenBao) on the installed lab-sno, which has neither operator yet: `--check --diff` first
    exits 0 and writes nothing to the cluster or the hub (their audit logs), predicting the operators' kinds and
    namespaces; then the real run: Red Hat's ESO (the real controller syncs an ExternalSecret), the hub's
    ApplicationSet and this cluster in its Placement's decisions and Argo CD's cluster secrets, and the hub's
    Application of the cluster (the hub's Argo CD owns the path: no root Application on the cluster) synced from the
    private repository with the hub's own repository Secret after one failed attempt (Argo CD's retry)."""
    lab = yaml.safe_load((REPO / "inventory" / "gitops.yml").read_text())
    lab = lab["all"]["children"]["clusters"]["children"]["lab-gitops"]["vars"]
    extra = {"external_secrets": {**lab["external_secrets"], "vault_url": site.bao.addr,
                                  "vault_path": f"clusters/{PROVISIONED}", "auth_mount": f"kubernetes/{PROVISIONED}"},
             "gitops": lab["gitops"]}
    site.bao.kv_put(lab["gitops"]["repo_credentials_vault_path"], {"username": "git", "password": "lab-repo-password"})
    site.bao.kv_put(f"clusters/{PROVISIONED}/gitops-app", {"password": "gitops-app-password"})
    if kube_api.get("/api/v1/namespaces/openshift-gitops") is None:
        kube_api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-gitops"}})
    make_cluster_ready(spoke_api, ["lab-sno-0"])
    run_it = dict(with_installer=True, tags="post,external_secrets,gitops",
                  # Looks a second apart instead of five (the roles' own settings; the stand-ins answer at once).
                  extra={"acm_hub_kubeconfig": str(hub), "acm_wait": False, **extra, "external_secrets_operator_interval": 1,
                         "gitops_operator_interval": 1, "gitops_app_interval": 1},
                  env_more={"PROXSHIFT_TEST_KUBECONFIG": str(cluster_kubeconfig)})
    gitops = FakeGitOps(spoke_api, "openshift-gitops", "openshift-gitops", "openshift-gitops-operator", hub_api=kube_api,
                        private=True)
    with FakeOlm(spoke_api, "external-secrets-operator", module_user="admin"), \
            FakeOlm(spoke_api, "openshift-gitops-operator", module_user="admin"), \
            FakeEsoOperator(spoke_api, "external-secrets-operator"), gitops:
        since = {api.url: len(api.audit_events()) for api in (spoke_api, kube_api)}
        check = run_flow("site.yaml", PROVISIONED, check=True, diff=True, **run_it)
        assert check.rc == 0, check.output
        time.sleep(0.5)
        for api in (spoke_api, kube_api):
            # The modules' user (the flow's kubeconfigs carry the admin token); the stand-ins write nothing
            # before an operator is installed, which check mode never does.
            writes = [(e["verb"], e["requestURI"]) for e in api.audit_events()[since[api.url]:]
                      if e["user"]["username"] == "admin" and e["verb"] in ("create", "update", "patch", "delete")
                      and "dryRun=All" not in e["requestURI"]]
            assert writes == [], writes
        notes = [x.get("note", "") for r in check.results for x in r["result"].get("results", []) or []
                 if isinstance(x, dict)]
        assert any(n.startswith("would create (kind not served yet: installed by the External Secrets Operator")
                   for n in notes), notes
        assert any(n.startswith("would create (namespace openshift-gitops not there yet") for n in notes), notes

        with external_secrets_controller(spoke_api, tmp_path) as log:
            run = run_flow("site.yaml", PROVISIONED, **run_it)
            assert run.rc == 0, run.output
            # The store may be used from the namespace the root Application deploys to (inventory/gitops.yml names
            # none: the default), and from no other.
            store = spoke_api.get("/apis/external-secrets.io/v1/clustersecretstores/vault")
            assert store["spec"]["conditions"] == [{"namespaces": ["openshift-gitops"]}], store["spec"]
            external_secret(spoke_api, "openshift-gitops", "db", "vault", f"clusters/{PROVISIONED}/gitops-app")
            synced = ready_condition(spoke_api, "/apis/external-secrets.io/v1/namespaces/openshift-gitops/externalsecrets/db")
            assert synced["status"] == "True", (synced, log.read_text()[-3000:])
            secret = spoke_api.get("/api/v1/namespaces/openshift-gitops/secrets/db")
            assert base64.b64decode(secret["data"]["password"]).decode() == "gitops-app-password"
            # Another cluster's path through the same store: Vault refuses, no Secret is written.
            site.bao.kv_put("clusters/lab-compact/app", {"password": "another-clusters-password"})
            external_secret(spoke_api, "openshift-gitops", "theirs", "vault", "clusters/lab-compact/app")
            refused = ready_condition(spoke_api, "/apis/external-secrets.io/v1/namespaces/openshift-gitops/externalsecrets/theirs")
            assert refused["status"] == "False" and refused["reason"] == "SecretSyncedError", refused
            # This cluster's path from a namespace outside the store's conditions: ESO refuses the store.
            external_secret(spoke_api, "gitops-app", "db", "vault", f"clusters/{PROVISIONED}/gitops-app")
            outside = ready_condition(spoke_api, "/apis/external-secrets.io/v1/namespaces/gitops-app/externalsecrets/db")
            assert (outside["status"], outside["reason"]) == ("False", "SecretSyncedError"), outside
            why = event_message(spoke_api, "gitops-app", "db", "denied by spec.condition")
            assert 'using cluster store "vault" is not allowed from namespace "gitops-app"' in why, why
            assert spoke_api.get("/api/v1/namespaces/gitops-app/secrets/db") is None
    # The hub's ApplicationSet deploys the path, so the hub's Argo CD owns it: no root Application on the cluster.
    assert spoke_api.get("/apis/argoproj.io/v1alpha1/namespaces/openshift-gitops/applications/root") is None
    app = kube_api.get(f"/apis/argoproj.io/v1alpha1/namespaces/openshift-gitops/applications/{PROVISIONED}-root")
    assert app["status"]["operationState"]["retryCount"] == 1 and app["status"]["sync"]["status"] == "Synced"
    assert app["spec"]["source"]["repoURL"] == lab["gitops"]["repo_url"]
    appset = kube_api.get("/apis/argoproj.io/v1alpha1/namespaces/openshift-gitops/applicationsets/default-gitops")
    assert appset["spec"]["generators"][0]["clusterDecisionResource"]["configMapRef"] == "acm-placement"
    decision = kube_api.get("/apis/cluster.open-cluster-management.io/v1beta1/namespaces/openshift-gitops/"
                            "placementdecisions/default-gitops-decision-1")
    assert PROVISIONED in [d["clusterName"] for d in decision["status"]["decisions"]], decision
    assert kube_api.get(f"/api/v1/namespaces/openshift-gitops/secrets/{PROVISIONED}-application-manager-cluster-secret")
    assert "lab-repo-password" not in check.output + run.output and site.canary not in check.output + run.output


def test_readiness_counts_the_nodes_in_the_cluster_not_the_inventory(run_flow, flow, site, hub, cluster_kubeconfig,
                                                                    provisioned, spoke_api: KubeApi, tmp_path):  # noqa: F811
    """A worker added to lab-sno's inventory group that scale.yaml has not joined yet (no VM, no Node): the
    readiness gate of an installed cluster (`--tags install`) counts the nodes of its record, so it passes on the
    one node there is (before, the phase check refused the run for the host's missing VM, and readiness waited for
    two nodes); with that node NotReady it fails, the message naming it."""
    inventory = tmp_path / "inventory"
    shutil.copytree(REPO / "inventory", inventory)
    sno = yaml.safe_load((inventory / "sno.yml").read_text())
    sno["all"]["children"]["clusters"]["children"][PROVISIONED]["hosts"]["lab-sno-1"] = {
        "ip": "10.20.0.12", "mac": "BC:24:11:20:00:12", "role": "worker"}
    (inventory / "sno.yml").write_text(yaml.safe_dump(sno))
    run_it = {"with_installer": True, "tags": "install", "inventory": inventory,
              "env_more": {"PROXSHIFT_TEST_KUBECONFIG": str(cluster_kubeconfig)}}
    ready = run_flow("site.yaml", PROVISIONED, extra={"acm_hub_kubeconfig": str(hub), "cluster_ready_timeout": 15}, **run_it)
    assert ready.rc == 0, ready.output
    assert [x for x in ready.results if x["task"].endswith("Report readiness")], [x["task"] for x in ready.results]
    assert site.sim.vm_by_name("lab-sno-1") is None, "readiness makes no VM; scale.yaml joins the host"

    spoke_api.patch_status("/api/v1/nodes/lab-sno-0", {"conditions": [condition("Ready", "False", "kubelet stopped posting")]})
    try:
        not_ready = run_flow("site.yaml", PROVISIONED, extra={"acm_hub_kubeconfig": str(hub), "cluster_ready_timeout": 5}, **run_it)
    finally:
        spoke_api.patch_status("/api/v1/nodes/lab-sno-0", {"conditions": [condition("Ready", "True")]})
    assert not_ready.rc != 0, not_ready.output
    [failed] = [x for x in not_ready.results if x["status"] == "failed" and x["task"].endswith("Stop when the cluster is not ready")]
    assert "node lab-sno-0: Ready" in failed["result"]["msg"] and "expected nodes" not in failed["result"]["msg"], failed


def test_raising_ocp_version_upgrades_the_installed_cluster(run_flow, flow, site, hub, cluster_kubeconfig,
                                                            provisioned, spoke_api: KubeApi, tmp_path):  # noqa: F811
    """lab-sno runs 4.19.7; its ocp_version raised to 4.19.9, the whole site.yaml run finds the cluster ready
    at its old version, takes an etcd backup into the object store (the restore point before an upgrade: s3s-fs,
    the node played by standins/node_debug.py), sets the channel, upgrades it through the ClusterVersion (the test
    plays the cluster-version operator), checks it ready at 4.19.9 and records that version. Last in this module: it
    moves the cluster on."""
    assert site.record(PROVISIONED)["version"] == "4.19.7"
    spoke_api.ok("PATCH", "/api/v1/nodes/lab-sno-0", {"metadata": {"labels": {"node-role.kubernetes.io/master": ""}}},
                 content_type="application/merge-patch+json")
    spoke_api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": "openshift-etcd"}})
    spoke_api.request("POST", "/api/v1/namespaces/openshift-etcd/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "etcd-lab-sno-0"},
        "spec": {"nodeName": "lab-sno-0", "containers": [{"name": "etcd", "image": "quay.io/x/etcd@sha256:1"}]}})
    fake = FakeCVO(spoke_api, {"stable-4.19": releases("4.19.8", "4.19.9")},
                   module_user="admin", token=spoke_api.kubeconfig_token).ready()
    try:
        with running_s3(tmp_path) as store, BackupNodes(spoke_api, tmp_path / "nodes"):
            run = run_flow("site.yaml", PROVISIONED, with_installer=True,
                           extra={"acm_hub_kubeconfig": str(hub), "acm_wait": False, "ocp_version": "4.19.9",
                                  "cluster_upgrade_poll_interval": 1, "etcd_backup_poll_interval": 1,
                                  "etcd_backup_store": {"endpoint_url": store.endpoint, "bucket": store.bucket}},
                           # Only the 4.19.7 installer is there: an installed cluster needs none of the new version.
                           env_more={"PROXSHIFT_TEST_KUBECONFIG": str(cluster_kubeconfig),
                                     "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET_CANARY})
            objects = store.objects()
    finally:
        fake.finish()
    assert run.rc == 0, run.output
    tasks = [x["task"] for x in run.results]
    backup_at = next(i for i, t in enumerate(tasks) if t.endswith("Take the etcd backup"))
    assert backup_at < next(i for i, t in enumerate(tasks) if t.endswith("Upgrade the cluster through its ClusterVersion"))
    [backup] = site.record(PROVISIONED)["etcd_backups"]
    assert backup["name"].startswith("pre-upgrade-") and backup["version"] == "4.19.7", backup
    assert sorted(f["object"] for f in backup["files"]) == sorted(objects), objects
    assert S3_SECRET_CANARY not in run.output
    def result(name: str) -> dict:
        found = [x for x in run.results if x["task"].endswith(name)]
        assert found, [x["task"] for x in run.results]
        return found[-1]

    r = result("Upgrade the cluster through its ClusterVersion")["result"]
    assert (r["changed"], r["from"], r["to"], r["version"]) == (True, "4.19.7", "4.19.9", "4.19.9"), r
    assert [u["version"] for u in fake.updates] == ["4.19.9"]
    assert r["progress"][-1]["done"] is True
    assert result("Check that the cluster is ready at its new version")["status"] == "ok"
    assert site.record(PROVISIONED)["version"] == "4.19.9"
    assert site.record(PROVISIONED)["phase"] == "imported"
    assert vmgenids(site, PROVISIONED) == provisioned
    assert site.canary not in run.output
    spoke_api.ok("PATCH", f"{CV}/version", {"spec": {"channel": None, "desiredUpdate": None}},
                 content_type="application/merge-patch+json")
