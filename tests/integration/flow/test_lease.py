"""One run per cluster (#32): the cluster's lease in Vault, runs refused while another holds it, a killed run's
lease taken over, and the record rules that keep a run from booting credentials the record does not hold.
Real ansible-playbook against pvesim and OpenBao, with the installer double; the runs stop after the `start`
phase (what they protect — one ISO build, one set of VMs, the recorded credentials — is all there by then)."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import threading
import time

from testlib import REPO, ansible_env, tool

CLUSTER = "lab-compact"
HOSTS = [f"{CLUSTER}-{i}" for i in range(3)]
# Every phase up to booting the VMs; the install phases wait for a cluster, which is not what is tested here.
BUILD = "preflight,manifests,iso,vms,start"
LEASE = f"openshift/clusters/{CLUSTER}/lease"
NO_HUB = {"acm_hub_kubeconfig": ""}


def calls_env(tmp_path) -> dict:
    return {"PROXSHIFT_TEST_INSTALLER_CALLS": str(tmp_path / "installer-calls")}


def image_builds(tmp_path) -> int:
    calls = tmp_path / "installer-calls"
    return sum(1 for line in calls.read_text().splitlines() if line.startswith("agent create image")) \
        if calls.exists() else 0


def lease(site) -> dict:
    return site.bao.kv_get(LEASE) or {}


def failed_tasks(run) -> list[str]:
    return [r["task"] for r in run.results if r["status"] == "failed"]


def touched(run) -> list[str]:
    """The tasks of a run that called Proxmox or built anything (not skipped)."""
    return [r["task"] for r in run.results if r["status"] != "skipped"
            and r["action"].split(".")[-1] in {"proxmox_vm", "vm_lifecycle", "proxmox_vm_info", "ocp_manifests"}]


def test_two_runs_for_one_fresh_cluster_build_once_and_the_loser_names_the_holder(run_flow, site, tmp_path):
    runs = {}

    def go(name: str):
        runs[name] = run_flow("site.yaml", CLUSTER, with_installer=True, tags=BUILD, extra=NO_HUB,
                              env_more=calls_env(tmp_path))

    threads = [threading.Thread(target=go, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
        time.sleep(0.2)  # run_playbook numbers its runs; both are still starting ansible-playbook together
    for t in threads:
        t.join()
    [winner] = [r for r in runs.values() if r.rc == 0]
    [loser] = [r for r in runs.values() if r.rc != 0]
    assert winner.rc == 0, winner.output
    holder = lease(site)["last_holder"]["run_id"]
    assert "holder" not in lease(site), "the winner released its lease at the end"
    assert failed_tasks(loser) == ["Lease — acquire"], failed_tasks(loser)
    assert f"held by run {holder} on host " in loser.output and " ago" in loser.output, loser.output
    assert touched(loser) == [], "the loser called Proxmox or built something before it was refused"
    # One ISO build, one VM per host, and the record holds the credentials of the ISO the VMs boot.
    assert image_builds(tmp_path) == 1
    vms = site.owned_vms(CLUSTER)
    assert sorted(vm["config"]["name"] for vm in vms) == HOSTS
    record = site.record(CLUSTER)
    build = site.work / CLUSTER / "agent"
    assert record["kubeconfig"] == (build / "auth/kubeconfig").read_text()
    assert record["iso_sha256"] == hashlib.sha256((build / "agent.x86_64.iso").read_bytes()).hexdigest()
    for vm in vms:
        assert record["iso_volid"] in json.dumps(vm["config"]), vm["config"]


def start_killable(site, tmp_path, tags: str, **extra) -> subprocess.Popen:
    cmd = [tool("ansible-playbook"), "-i", str(REPO / "inventory"), str(REPO / "playbooks" / "site.yaml"),
           "-e", json.dumps(site.extra_vars(CLUSTER, **NO_HUB, **extra)), "--tags", tags]
    return subprocess.Popen(cmd, env=ansible_env(tmp_path, site.env(with_installer=True)), cwd=str(REPO),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def kill_when(proc: subprocess.Popen, ready) -> None:
    """Kill the run (its own process group: ansible-playbook, its workers and modules) once `ready()`."""
    try:
        for _ in range(1200):  # bounded by polls
            if ready() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the run ended before it could be killed"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)


def test_a_killed_run_blocks_until_its_lease_expires_or_is_broken(run_flow, site, tmp_path):
    killed = start_killable(site, tmp_path, "preflight")
    kill_when(killed, lambda: "holder" in lease(site))
    dead = lease(site)["holder"]["run_id"]

    refused = run_flow("site.yaml", CLUSTER, tags="preflight", extra=NO_HUB)
    assert refused.rc != 0 and failed_tasks(refused) == ["Lease — acquire"], refused.output
    assert f"held by run {dead}" in refused.output and "in phase preflight" in refused.output, refused.output
    assert f"-e proxshift_lease_break={dead}" in refused.output
    # Breaking another run's id does not break this one.
    wrong = run_flow("site.yaml", CLUSTER, tags="preflight", extra={**NO_HUB, "proxshift_lease_break": "not-it"})
    assert wrong.rc != 0 and f"held by run {dead}" in wrong.output

    # Time passes: the dead run's lease expires (its expiry moved into the past, as the clock would) and the
    # next run takes it over with a warning naming the dead run.
    status, _ = site.bao.api("POST", f"secret/data/{LEASE}",
                             {"data": {**lease(site), "expires_at": int(time.time()) - 1}})
    assert status == 200
    taken = run_flow("site.yaml", CLUSTER, tags="preflight", extra=NO_HUB)
    assert taken.rc == 0, taken.output
    assert f"took over the expired lease secret/{LEASE} from run {dead}" in taken.output, taken.output
    after = lease(site)
    assert "holder" not in after and after["last_holder"]["run_id"] != dead

    # A run killed again; the user names it dead: taken over at once.
    killed = start_killable(site, tmp_path, "preflight")
    kill_when(killed, lambda: "holder" in lease(site))
    dead = lease(site)["holder"]["run_id"]
    broken = run_flow("site.yaml", CLUSTER, tags="preflight", extra={**NO_HUB, "proxshift_lease_break": dead})
    assert broken.rc == 0, broken.output
    assert f"took over the broken (lease_break) lease secret/{LEASE} from run {dead}" in broken.output


def test_check_mode_takes_no_lease(run_flow, site):
    run = run_flow("site.yaml", CLUSTER, tags="preflight", extra=NO_HUB, check=True)
    assert run.rc == 0, run.output
    assert site.bao.api("GET", f"secret/metadata/{LEASE}")[0] == 404


def sealer(site, tmp_path) -> str:
    script = tmp_path / "seal_vault.py"
    script.write_text(
        "import urllib.request\n"
        f"urllib.request.urlopen(urllib.request.Request({site.bao.addr + '/v1/sys/seal'!r}, method='PUT',"
        f" headers={{'X-Vault-Token': {site.bao.token!r}}}))\n")
    return f"{os.sys.executable} {script}"


def test_only_recorded_credentials_boot(run_flow, site, tmp_path):
    """Vault sealed at the build's record write, then `--tags vms,start`; a soft-deleted record with the
    cluster's VMs still there; a forced rebuild killed after its first delete, then a rerun."""
    env = calls_env(tmp_path)
    sealed = run_flow("site.yaml", CLUSTER, with_installer=True, tags="preflight,manifests,iso", extra=NO_HUB,
                      env_more={**env, "PROXSHIFT_TEST_ON_IMAGE": sealer(site, tmp_path)})
    assert sealed.rc != 0 and "could not be released" in sealed.output, sealed.output
    site.bao.unseal()
    assert site.record(CLUSTER) is None
    dead = lease(site)["holder"]["run_id"]

    # The ISO in the work folder was never recorded: no VM boots it.
    boot = run_flow("site.yaml", CLUSTER, with_installer=True, tags="vms,start",
                    extra={**NO_HUB, "proxshift_lease_break": dead}, env_more=env)
    assert boot.rc != 0
    assert failed_tasks(boot) == ["Check that the ISO the VMs boot is the recorded build"], failed_tasks(boot)
    assert "was never recorded in Vault" in boot.output and "--tags iso" in boot.output, boot.output
    assert site.owned_vms(CLUSTER) == []
    # As the message says: the iso phase records that build (no second build), then the VMs boot it.
    done = run_flow("site.yaml", CLUSTER, with_installer=True, tags="iso,vms,start", extra=NO_HUB, env_more=env)
    assert done.rc == 0, done.output
    assert image_builds(tmp_path) == 1
    record = site.record(CLUSTER)
    assert record["phase"] == "installing" and len(site.owned_vms(CLUSTER)) == 3
    vmgenids = {vm["vmid"]: vm["config"]["vmgenid"] for vm in site.owned_vms(CLUSTER)}

    # A soft-deleted record makes the cluster look new; its VMs say otherwise.
    version = site.record_version(CLUSTER)
    assert site.bao.api("DELETE", f"secret/data/openshift/clusters/{CLUSTER}")[0] == 204
    lost = run_flow("site.yaml", CLUSTER, with_installer=True, tags=BUILD, extra=NO_HUB, env_more=env)
    assert lost.rc != 0
    assert failed_tasks(lost) == ["Refuse a new build over VMs of the cluster that have no record"], lost.output
    assert "force_install" in lost.output and all(h in lost.output for h in HOSTS), lost.output
    assert site.record_version(CLUSTER) == version and site.record(CLUSTER) is None
    assert {vm["vmid"]: vm["config"]["vmgenid"] for vm in site.owned_vms(CLUSTER)} == vmgenids
    status, _ = site.bao.api("POST", f"secret/undelete/openshift/clusters/{CLUSTER}", {"versions": [version]})
    assert status == 204

    # force_install dies after its first VM delete: the record says `rebuilding`, and a plain rerun (no
    # force_install) continues the rebuild instead of trusting a cluster that is gone.
    seq = site.sim.last_seq()
    forced = start_killable(site, tmp_path, BUILD, force_install=True)
    kill_when(forced, lambda: any(r["method"] == "DELETE" and "/qemu/" in r["path"] for r in site.sim.requests(seq)))
    assert site.record(CLUSTER)["phase"] == "rebuilding"
    assert site.record(CLUSTER)["kubeconfig"] == record["kubeconfig"], "the old credentials stay until replaced"
    dead = lease(site)["holder"]["run_id"]
    rerun = run_flow("site.yaml", CLUSTER, with_installer=True, tags=BUILD,
                     extra={**NO_HUB, "proxshift_lease_break": dead}, env_more=env)
    assert rerun.rc == 0, rerun.output
    assert image_builds(tmp_path) == 2
    rebuilt = site.record(CLUSTER)
    assert rebuilt["phase"] == "installing" and rebuilt["iso_sha256"] != ""
    now = {vm["vmid"]: vm["config"]["vmgenid"] for vm in site.owned_vms(CLUSTER)}
    assert len(now) == 3 and not set(now.values()) & set(vmgenids.values()), "the old VMs were not all replaced"


def eventually(cond) -> bool:
    """Poll `cond` (bounded: five minutes); whether it came true."""
    for _ in range(3000):
        if cond():
            return True
        time.sleep(0.1)
    return False


def test_a_long_install_wait_keeps_the_lease_and_stops_once_it_is_lost(run_flow, site, tmp_path):
    """#43: the install wait outlives the lease's TTL. A second run started after the expiry the last phase
    renewal gave is still refused (the run's keeper renews it); once another run holds the lease, the waiting
    run stops at its next look instead of carrying on."""
    waiting, go = tmp_path / "waiting", tmp_path / "go"
    # The installer's wait lasts until the test lets it go (bounded, so a failed test leaves no process).
    hold = f"touch {waiting}; for i in $(seq 3000); do [ -f {go} ] && break; sleep 0.1; done"
    env = {**calls_env(tmp_path), "PROXSHIFT_TEST_ON_WAIT": hold, "PROXSHIFT_TEST_INSTALL_FAIL": "bootstrap-complete"}
    runs = {}

    def first():
        runs["a"] = run_flow("site.yaml", CLUSTER, with_installer=True, tags=f"{BUILD},install", env_more=env,
                             extra={**NO_HUB, "proxshift_lease_ttl": 6, "install_wait_poll": 1})

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert eventually(waiting.exists), "the run never reached the install wait"
        held = lease(site)
        assert held["phase"] == "install", held
        holder = held["holder"]["run_id"]
        # Past the expiry the install phase's renewal gave, a second run comes: refused, the cluster is held.
        assert eventually(lambda: time.time() > held["expires_at"] + 1)
        second = run_flow("site.yaml", CLUSTER, tags="preflight", extra=NO_HUB)
        assert second.rc != 0 and failed_tasks(second) == ["Lease — acquire"], second.output
        assert f"held by run {holder} on host " in second.output and "in phase install" in second.output, \
            second.output
        assert lease(site)["holder"]["run_id"] == holder

        # Another run holds the lease now (as after a Vault outage longer than the TTL): the wait ends by
        # itself, the installer still waiting.
        status, _ = site.bao.api("POST", f"secret/data/{LEASE}", {"data": {
            **lease(site), "holder": {"run_id": "intruder", "host": "ctl9"}, "expires_at": int(time.time()) + 3600}})
        assert status == 200
        thread.join(timeout=600)
        assert not thread.is_alive() and not go.exists()
    finally:
        go.touch()
        thread.join()
    a = runs["a"]
    assert a.rc != 0 and failed_tasks(a) == [
        "proxshift.openshift.install_wait : Fail with the installer's own words, redacted"], failed_tasks(a)
    assert "bootstrap-complete did not succeed (stopped: this run (run " in a.output, a.output
    assert "held by run intruder on host ctl9" in a.output, a.output
    assert lease(site)["holder"]["run_id"] == "intruder", "the run released a lease it no longer held"


def placement(site) -> str:
    return "openshift/clusters/.placement/" + "".join(
        c if c.isalnum() or c in ".-" else "_" for c in str(site.sim.host))


def test_breaking_a_dead_run_frees_its_placement_lease_too(run_flow, site, tmp_path):
    """#43: a run killed while it placed its VMs held the cluster's lease and the Proxmox placement lease. The
    run that breaks it (-e proxshift_lease_break) frees both at once: its own VM phase does not wait out the
    placement lease's TTL (nor would any other cluster's)."""
    killed = start_killable(site, tmp_path, BUILD)
    kill_when(killed, lambda: "holder" in (site.bao.kv_get(placement(site)) or {}))
    dead = lease(site)["holder"]["run_id"]
    assert site.bao.kv_get(placement(site))["holder"]["run_id"] == dead
    broken = run_flow("site.yaml", CLUSTER, with_installer=True, tags=BUILD, env_more=calls_env(tmp_path),
                      extra={**NO_HUB, "proxshift_lease_break": dead, "proxshift_placement_wait": 5})
    assert broken.rc == 0, broken.output
    assert f"broke the lease secret/{placement(site)} of run {dead} on host " in broken.output, broken.output
    assert "Waiting up to" not in broken.output
    freed = site.bao.kv_get(placement(site))
    assert "holder" not in freed and freed["last_holder"]["run_id"] != dead, freed


def test_a_waiting_placement_acquire_says_what_it_waits_for(run_flow, site, tmp_path):
    """#43: another cluster's run is placing its VMs on this Proxmox: the run says whose lease it waits for,
    how long, and until when, before its silent wait."""
    site.bao.kv_put(placement(site), {
        "holder": {"run_id": "placer", "host": "ctl7"}, "phase": "vms other-cluster",
        "acquired_at": int(time.time()), "renewed_at": int(time.time()), "expires_at": int(time.time()) + 3600})
    run = run_flow("site.yaml", CLUSTER, with_installer=True, tags=BUILD, env_more=calls_env(tmp_path),
                   extra={**NO_HUB, "proxshift_placement_wait": 2})
    assert run.rc != 0 and failed_tasks(run) == ["Placement lease — acquire"], failed_tasks(run)
    said = " ".join(run.output.split())
    assert (f"Waiting up to 2 s (proxshift_placement_wait) for the Proxmox placement lease "
            f"openshift/clusters/.placement/") in said, said
    assert "run placer on host ctl7 is placing VMs (vms other-cluster)" in said, said
    assert "-e proxshift_lease_break=placer" in said
    assert "waited 2s (lease_wait)" in said
