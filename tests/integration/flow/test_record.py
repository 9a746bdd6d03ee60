"""The cluster's record in Vault is what a rerun goes by, not the work folder (#22): a run that stops during
the install and a rerun in a new, empty work folder; a changed input on an installing cluster; Vault sealed
at each write point; and the AWX shape (ansible-runner, a fresh private data dir per job). Real
ansible-playbook, OpenBao, pvesim, the installer double and a kube-apiserver playing the new cluster."""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import ansible_runner
import pytest
import yaml

from kube_fixtures import KubeApi, condition, kube_api, spoke_api  # noqa: F401 (pytest fixtures)
from test_force_install import MC, forget_on_hub
from test_full_install import make_cluster_ready
from testlib import REPO, TEST_CLUSTER_ID as CLUSTER_ID, VENV

CLUSTER = "lab-sno"


@pytest.fixture
def cluster_api(spoke_api: KubeApi, tmp_path):  # noqa: F811
    """The installed cluster's API (the double copies this kubeconfig into auth/). Not the hub (kube_api):
    giving the hub the cluster's ID would make later imports into it self-imports."""
    kubeconfig = tmp_path / "cluster.kubeconfig"
    kubeconfig.write_text(spoke_api.kubeconfig(spoke_api.admin_token))
    make_cluster_ready(spoke_api, [f"{CLUSTER}-0"])
    return kubeconfig


def installer_env(tmp_path, kubeconfig: Path, **more) -> dict:
    return {"PROXSHIFT_TEST_KUBECONFIG": str(kubeconfig),
            "PROXSHIFT_TEST_INSTALLER_CALLS": str(tmp_path / "installer-calls"), **more}


def image_builds(tmp_path) -> int:
    calls = tmp_path / "installer-calls"
    return sum(1 for line in calls.read_text().splitlines() if line.startswith("agent create image")) \
        if calls.exists() else 0


def vmgenids(site) -> dict:
    return {vm["vmid"]: vm["config"]["vmgenid"] for vm in site.owned_vms(CLUSTER)}


def sealer(site, tmp_path) -> str:
    script = tmp_path / "seal_vault.py"
    script.write_text(
        "import urllib.request\n"
        f"urllib.request.urlopen(urllib.request.Request({site.bao.addr + '/v1/sys/seal'!r}, method='PUT',"
        f" headers={{'X-Vault-Token': {site.bao.token!r}}}))\n")
    return f"{sys.executable} {script}"


def lease_of_dead_run(site) -> dict:
    """A run that failed because Vault was sealed could not release the cluster's lease either: the rerun
    names that run dead (-e proxshift_lease_break, as the refusal says) instead of waiting for the expiry."""
    return {"proxshift_lease_break": site.bao.kv_get(f"openshift/clusters/{CLUSTER}/lease")["holder"]["run_id"]}


def assert_no_record_secret(site, canary, *runs) -> None:
    """The record's secrets appear in no output: the kubeadmin password joins the session's leak scan (the
    kubeconfig would register its non-secret server URL too, so it is checked here, whole)."""
    record = site.record(CLUSTER) or {}
    if record.get("kubeadmin"):
        canary(record["kubeadmin"])
    for run in runs:
        for key in ("kubeadmin", "kubeconfig", "install_state"):
            if record.get(key):
                assert record[key] not in run.output, key


def test_rerun_in_an_empty_work_folder_resumes_the_install(run_flow, site, cluster_api, tmp_path, canary):
    env = installer_env(tmp_path, cluster_api)
    hub = {"acm_hub_kubeconfig": ""}
    stopped = run_flow("site.yaml", CLUSTER, with_installer=True, extra=hub,
                       env_more={**env, "PROXSHIFT_TEST_INSTALL_FAIL": "install-complete"})
    assert stopped.rc != 0 and "install-complete did not succeed" in stopped.output, stopped.output
    record = site.record(CLUSTER)
    assert record["phase"] == "installing", sorted(record)
    first_build = site.work / CLUSTER / "agent"
    assert record["kubeconfig"] == (first_build / "auth/kubeconfig").read_text()
    assert record["kubeadmin"] == (first_build / "auth/kubeadmin-password").read_text()
    assert record["install_state"] == (first_build / ".openshift_install_state.json").read_text()
    assert record["cluster_id"] and len(record["iso_sha256"]) == 64
    vms = vmgenids(site)
    assert len(vms) == 1 and image_builds(tmp_path) == 1

    empty = tmp_path / "fresh-checkout"
    resumed = run_flow("site.yaml", CLUSTER, with_installer=True, env_more=env,
                       extra={**hub, "proxshift_work_dir": str(empty)})
    assert resumed.rc == 0, resumed.output
    assert image_builds(tmp_path) == 1, "the ISO was built again"
    assert vmgenids(site) == vms, "the VMs were replaced"
    calls = (tmp_path / "installer-calls").read_text()
    assert f"agent wait-for install-complete --dir={empty / CLUSTER / 'agent'}" in calls, calls
    after = site.record(CLUSTER)
    assert after["phase"] == "installed" and after["version"] == "4.19.7"
    for key in ("kubeconfig", "kubeadmin", "install_state", "cluster_id", "iso_sha256", "iso_volid"):
        assert after[key] == record[key], f"{key} changed"
    # The restored build is the first one, byte for byte.
    assert (empty / CLUSTER / "agent/auth/kubeconfig").read_text() == record["kubeconfig"]

    # Installed: a third empty folder checks the cluster by logging in and changes nothing.
    version = site.record_version(CLUSTER)
    third = run_flow("site.yaml", CLUSTER, with_installer=True, env_more=env,
                     extra={**hub, "proxshift_work_dir": str(tmp_path / "third")})
    assert third.rc == 0, third.output
    assert site.record_version(CLUSTER) == version
    assert image_builds(tmp_path) == 1
    calls = (tmp_path / "installer-calls").read_text()
    assert str(tmp_path / "third") not in calls, "an installed cluster was waited for again"
    assert [t for t in third.changed_tasks() if "Restore" not in t and "work folders" not in t] == [], \
        third.changed_tasks()
    assert not list((tmp_path / "third").rglob(".installed"))
    assert_no_record_secret(site, canary, stopped, resumed, third)


def test_a_different_cluster_behind_the_name_is_refused(run_flow, site, cluster_api, spoke_api: KubeApi,  # noqa: F811
                                                        tmp_path):
    env = installer_env(tmp_path, cluster_api)
    assert run_flow("site.yaml", CLUSTER, with_installer=True, env_more=env,
                    extra={"acm_hub_kubeconfig": ""}).rc == 0
    set_id = lambda cid: spoke_api.ok(  # noqa: E731
        "PATCH", "/apis/config.openshift.io/v1/clusterversions/version", {"spec": {"clusterID": cid}},
        content_type="application/merge-patch+json")
    set_id("00000000-0000-4000-8000-00000000dead")
    try:
        other = run_flow("site.yaml", CLUSTER, with_installer=True, env_more=env,
                         extra={"acm_hub_kubeconfig": "", "proxshift_work_dir": str(tmp_path / "w2")})
    finally:
        set_id(CLUSTER_ID)  # the API server is shared by the session's tests
    assert other.rc != 0
    assert "00000000-0000-4000-8000-00000000dead" in other.output and "force_install" in other.output, other.output
    assert site.record(CLUSTER)["phase"] == "installed"


def test_changed_input_on_an_installing_cluster_is_reported_not_applied(run_flow, site, cluster_api, tmp_path):
    env = installer_env(tmp_path, cluster_api)
    hub = {"acm_hub_kubeconfig": ""}
    stopped = run_flow("site.yaml", CLUSTER, with_installer=True, extra=hub,
                       env_more={**env, "PROXSHIFT_TEST_INSTALL_FAIL": "bootstrap-complete"})
    assert stopped.rc != 0
    agent_config = (site.work / CLUSTER / "agent-config.yaml").read_text()
    version = site.record_version(CLUSTER)

    changed = run_flow("site.yaml", CLUSTER, with_installer=True, env_more=env,
                       extra={**hub, "ntp_sources": ["192.0.2.123"]})
    assert changed.rc == 0, changed.output
    assert image_builds(tmp_path) == 1, "an ISO was built for the changed input"
    assert (site.work / CLUSTER / "agent-config.yaml").read_text() == agent_config, "the manifests were rewritten"
    assert "agent-config.yaml (additionalNTPSources" in changed.output, changed.output
    assert "-e force_install=true" in changed.output
    assert not list((site.work / CLUSTER).glob("archive"))
    # The install went on with the build the VMs booted from.
    assert site.record(CLUSTER)["phase"] == "installed"
    assert site.record_version(CLUSTER) == version + 1


@pytest.mark.parametrize("point", ["build", "installed"])
def test_vault_sealed_at_a_write_point(run_flow, site, cluster_api, tmp_path, point, canary):
    hook = {"build": "PROXSHIFT_TEST_ON_IMAGE", "installed": "PROXSHIFT_TEST_ON_INSTALLED"}[point]
    env = installer_env(tmp_path, cluster_api)
    hub = {"acm_hub_kubeconfig": ""}
    sealed = run_flow("site.yaml", CLUSTER, with_installer=True, extra=hub,
                      env_more={**env, hook: sealer(site, tmp_path)})
    assert sealed.rc != 0
    failed = [r["task"] for r in sealed.results if r["status"] == "failed"]
    expected = {"build": "Write the cluster's record to Vault", "installed": "Store api, kubeconfig"}[point]
    assert len(failed) == 1 and expected in failed[0], failed
    assert "sealed" in sealed.output.lower(), sealed.output
    if point == "build":
        # Stopped before any VM exists (let alone boots from the ISO).
        assert site.owned_vms(CLUSTER) == []
    site.bao.unseal()
    if point == "build":
        assert site.record(CLUSTER) is None
    else:
        assert site.record(CLUSTER)["phase"] == "installing"
    before = site.record(CLUSTER)

    # The build point's only copy is the work folder (nothing booted from it yet); after that the record is.
    work = site.work if point == "build" else tmp_path / "fresh"
    rerun = run_flow("site.yaml", CLUSTER, with_installer=True, env_more=env,
                     extra={**hub, "proxshift_work_dir": str(work), **lease_of_dead_run(site)})
    assert rerun.rc == 0, rerun.output
    assert image_builds(tmp_path) == 1
    record = site.record(CLUSTER)
    assert record["phase"] == "installed"
    if before:
        assert record["kubeadmin"] == before["kubeadmin"]
    assert_no_record_secret(site, canary, sealed, rerun)


def join_after_sealing(hub: KubeApi, bao, cluster: str) -> threading.Thread:
    """Play the hub's import controller, sealing Vault first: once acm_import has created the
    ManagedCluster, seal Vault, then report the klusterlet Joined and Available. acm_import (which reads
    nothing from Vault here) waits for those conditions, so the record's `imported` write is the first
    Vault call after the seal: that write point, and no other, meets a sealed Vault."""
    def play():
        for _ in range(1200):  # bounded by polls: acm_import creates the ManagedCluster within the run
            if hub.get(f"{MC}/{cluster}") is not None:
                bao.api("PUT", "sys/seal")
                hub.patch_status(f"{MC}/{cluster}", {"conditions": [
                    condition("ManagedClusterJoined", "True"), condition("ManagedClusterConditionAvailable", "True")]})
                return
            time.sleep(0.25)
    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    return thread


def test_vault_sealed_at_the_imported_write_point(run_flow, site, cluster_api, kube_api: KubeApi,  # noqa: F811
                                                  tmp_path, canary):
    env = installer_env(tmp_path, cluster_api)
    hub_kc = tmp_path / "hub.kubeconfig"
    hub_kc.write_text(kube_api.kubeconfig(kube_api.admin_token))
    forget_on_hub(kube_api, CLUSTER)
    hub = {"acm_hub_kubeconfig": str(hub_kc), "acm_wait_timeout": 300}
    player = join_after_sealing(kube_api, site.bao, CLUSTER)
    sealed = run_flow("site.yaml", CLUSTER, with_installer=True, extra=hub, env_more=env)
    player.join(timeout=60)
    assert sealed.rc != 0
    # The leases' release after the failure (it fails too: reported, not failing the run) is left out.
    ran = [r for r in sealed.results if r["status"] != "skipped" and "Validating arguments" not in r["task"]
           and not r["task"].startswith(("Lease", "Placement lease"))]
    failed = [r["task"] for r in ran if r["status"] == "failed"]
    assert failed == ["proxshift.hashi_vault.record : Write the cluster's record to Vault"], failed
    # The failed write is the one right after the import, which succeeded.
    assert ran[-2]["task"].endswith("Import into or detach from the ACM hub") and ran[-2]["status"] == "ok", \
        [r["task"] for r in ran[-4:]]
    assert "sealed" in sealed.output.lower(), sealed.output
    site.bao.unseal()
    # The import happened; the record still says what the last good write said.
    before = site.record(CLUSTER)
    assert before["phase"] == "installed", before
    [mc_before] = [m for m in kube_api.get(MC)["items"] if m["metadata"]["name"] == CLUSTER]

    rerun = run_flow("site.yaml", CLUSTER, with_installer=True, extra={**hub, **lease_of_dead_run(site)},
                     env_more=env)
    assert rerun.rc == 0, rerun.output
    assert image_builds(tmp_path) == 1
    record = site.record(CLUSTER)
    assert (record["phase"], record["kubeadmin"]) == ("imported", before["kubeadmin"])
    [mc] = [m for m in kube_api.get(MC)["items"] if m["metadata"]["name"] == CLUSTER]
    assert mc["metadata"]["uid"] == mc_before["metadata"]["uid"], "the rerun re-created the ManagedCluster"
    assert_no_record_secret(site, canary, sealed, rerun)
    forget_on_hub(kube_api, CLUSTER)


def seal_after_vm_delete(site) -> threading.Thread:
    """Seal Vault as soon as deprovision has asked pvesim to delete a VM. Every Proxmox request of the run
    is slowed (a latency fault), so the watcher seals long before the tombstone write; the run's failed task
    then shows the seal met exactly that write point."""
    seq = site.sim.last_seq()

    def watch():
        for _ in range(2400):  # bounded by polls
            if any(r["method"] == "DELETE" and "/qemu/" in r["path"] for r in site.sim.requests(seq)):
                site.bao.api("PUT", "sys/seal")
                return
            time.sleep(0.1)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


VM_REMOVAL = "proxshift.proxmox.cluster_vms : Converge the cluster's VMs"


def test_deprovision_leaves_a_tombstone_and_survives_a_sealed_vault(run_flow, site, cluster_api, tmp_path, canary):
    env = installer_env(tmp_path, cluster_api)
    hub = {"acm_hub_kubeconfig": ""}
    built = run_flow("site.yaml", CLUSTER, with_installer=True, extra=hub, env_more=env)
    assert built.rc == 0, [r["result"].get("msg") for r in built.results if r["status"] == "failed"]
    installed, version = site.record(CLUSTER), site.record_version(CLUSTER)
    assert installed["phase"] == "installed"
    # The agent ISO the run uploaded and recorded (pull secret, the material behind the admin kubeconfig), and
    # two on the same storage deprovision must leave: a person's, and one named like an older build of ours.
    volid = installed["iso_volid"]
    assert volid.startswith(f"local:iso/{CLUSTER}-agent-") and volid.endswith(".iso"), volid
    holders = sorted(node for node, isos in site.sim.iso_files().items() if volid in isos)
    assert holders, site.sim.iso_files()
    others = {"local:iso/rhcos-live.x86_64.iso", f"local:iso/{CLUSTER}-agent-000000000000.iso"}
    for other in others:
        site.sim.upload_iso(holders[0], "local", other.split("/", 1)[1], b"\0" * 4096,
                            token=f"proxshift@pve!ansible={site.token_secret}")

    site.sim.fault({"latency": {"ms": 1000}})
    watcher = seal_after_vm_delete(site)
    sealed = run_flow("deprovision.yaml", CLUSTER, extra=hub)
    watcher.join(timeout=60)
    site.sim.clear_faults()
    assert sealed.rc != 0
    failed = [r["task"] for r in sealed.results if r["status"] == "failed"]
    assert failed == ["proxshift.hashi_vault.record : Write the cluster's record to Vault"], \
        [r["result"].get("msg") for r in sealed.results if r["status"] == "failed"]
    assert "sealed" in sealed.output.lower(), sealed.output
    assert site.owned_vms(CLUSTER) == []
    # The ISO went with the VMs (Proxmox only, before the tombstone write); nothing else on the storage did.
    assert sealed.task(VM_REMOVAL)["iso_removed"] == [{"volid": volid, "nodes": holders}], sealed.task(VM_REMOVAL)
    left = site.sim.iso_files()
    assert all(volid not in isos for isos in left.values()), left
    assert others <= left[holders[0]], left
    site.bao.unseal()
    assert site.record_version(CLUSTER) == version, "the tombstone was written although Vault was sealed"

    # The rerun finds nothing left to delete (the record still names the ISO: no change) and writes the
    # tombstone; the history keeps the credentials.
    rerun = run_flow("deprovision.yaml", CLUSTER, extra={**hub, **lease_of_dead_run(site)})
    assert rerun.rc == 0, rerun.output
    assert rerun.task(VM_REMOVAL)["iso_removed"] == [] and not rerun.task(VM_REMOVAL)["changed"]
    assert others <= site.sim.iso_files()[holders[0]]
    assert site.record(CLUSTER) == {"phase": "deprovisioned"}
    assert site.record_version(CLUSTER) == version + 1
    status, old = site.bao.api("GET", f"secret/data/openshift/clusters/{CLUSTER}?version={version}")
    assert status == 200 and old["data"]["data"]["kubeadmin"] == installed["kubeadmin"]
    assert_no_record_secret(site, canary, sealed, rerun)
    for run in (sealed, rerun):
        assert installed["kubeadmin"] not in run.output


def test_sealed_vault_stops_the_run_before_anything_happens(run_flow, site, tmp_path):
    site.bao.api("PUT", "sys/seal")
    run = run_flow("site.yaml", CLUSTER, with_installer=True, extra={"acm_hub_kubeconfig": ""})
    assert run.rc != 0
    failed = [r["task"] for r in run.results if r["status"] == "failed"]
    # The first Vault call is taking the cluster's lease.
    assert failed == ["Lease — acquire"], failed
    assert "sealed" in run.output.lower()
    assert site.owned_vms(CLUSTER) == []
    site.bao.unseal()


def awx_job(tmp_path, site, n: int, env: dict):
    """One AWX job: a fresh private data dir and a fresh project checkout's work folder."""
    pdd = tmp_path / f"job{n}"
    (pdd / "env").mkdir(parents=True)
    extra = site.extra_vars(CLUSTER, acm_hub_kubeconfig="", proxshift_work_dir=str(pdd / "project" / ".proxshift"))
    (pdd / "env" / "extravars").write_text(yaml.safe_dump(extra))
    (pdd / "env" / "envvars").write_text(yaml.safe_dump({
        **site.env(with_installer=True), **env,
        "ANSIBLE_COLLECTIONS_PATH": str(REPO),
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
        "ANSIBLE_HOME": str(tmp_path / f"ansible-home{n}"),
        # The installer double and nmstatectl (site.env's PATH), with this venv's tools first.
        "PATH": f"{VENV / 'bin'}:{site.env(with_installer=True)['PATH']}",
    }))
    return ansible_runner.run(private_data_dir=str(pdd), project_dir=str(REPO), playbook="playbooks/site.yaml",
                              inventory=str(REPO / "inventory"), quiet=True, timeout=900)


def changed_actions(job) -> list[str]:
    return [e["event_data"].get("resolved_action") for e in job.events
            if e["event"] == "runner_on_ok" and e["event_data"]["res"].get("changed")]


def test_awx_jobs_in_fresh_private_data_dirs_converge(site, cluster_api, tmp_path):
    env = installer_env(tmp_path, cluster_api)
    first = awx_job(tmp_path, site, 1, env)
    assert first.status == "successful", first.stdout.read()[-4000:]
    vms = vmgenids(site)
    version = site.record_version(CLUSTER)
    second = awx_job(tmp_path, site, 2, env)
    assert second.status == "successful", second.stdout.read()[-4000:]
    assert image_builds(tmp_path) == 1
    assert vmgenids(site) == vms
    assert site.record_version(CLUSTER) == version and site.record(CLUSTER)["phase"] == "installed"
    # Only the local cache was filled in; nothing on Proxmox or in Vault changed.
    assert set(changed_actions(second)) <= {"ansible.builtin.copy", "ansible.builtin.file"}, changed_actions(second)
    everything = json.dumps(list(second.events)) + second.stdout.read()
    record = site.record(CLUSTER)
    for secret in (site.canary, record["kubeadmin"], site.bao.token):
        assert secret not in everything
