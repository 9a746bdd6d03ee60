"""playbooks/site.yaml end to end against pvesim and OpenBao, with the example inventories."""
from __future__ import annotations

import subprocess

import pytest
import yaml

from services import nmstatectl_bin
from testlib import REPO

FIXTURE_BIN = REPO / "tests" / "fixtures" / "bin"  # the installer and oc doubles
CLUSTERS = {"lab-sno": 1, "lab-compact": 3, "prod-ha": 6}


@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
def test_site_creates_the_cluster_and_a_rerun_changes_nothing(cluster, run_flow, site):
    first = run_flow("site.yaml", cluster)
    assert first.rc == 0, first.output
    vms = site.owned_vms(cluster)
    assert len(vms) == CLUSTERS[cluster], vms
    assert all(vm["running"] for vm in vms), vms
    # The manifests exist and hold each VM's MAC.
    agent_config = (site.work / cluster / "agent-config.yaml").read_text()
    for vm in vms:
        mac = next(p.split("=")[1] for p in vm["config"]["net0"].split(",") if p.count(":") == 5)
        assert mac.lower() in agent_config.lower(), (mac, agent_config)
    assert site.canary not in first.output

    second = run_flow("site.yaml", cluster)
    assert second.rc == 0, second.output
    assert second.changed_tasks() == [], second.changed_tasks()


def test_unowned_vm_survives_deprovision(run_flow, site):
    assert run_flow("site.yaml", "lab-compact").rc == 0
    before = {vm["vmid"] for vm in site.sim.state()["vms"]}
    assert 100 in before  # the seed's bastion, not ours
    gone = run_flow("deprovision.yaml", "lab-compact")
    assert gone.rc == 0, gone.output
    assert site.owned_vms("lab-compact") == []
    assert site.sim.vm(100) is not None, "deprovision touched a VM it does not own"
    assert not (site.work / "lab-compact").exists()


# site.yaml --check --diff on a cluster never installed (pvesim, Vault and the hub's audit logs show no write):
# flow/test_phases_alone.py, test_check_diff_on_a_never_installed_cluster_predicts_every_phase_and_writes_nothing.


def test_preflight_lists_every_problem_at_once(run_flow, site):
    # An impossible VM size and a pinned node that does not exist.
    run = run_flow(
        "site.yaml", "lab-sno", tags="preflight",
        extra={"preflight_check_dns": True},
        args=["-e", '{"vm_defaults": {"memory": 9999999}}'],
    )
    assert run.rc != 0
    assert "Preflight found" in run.output, run.output
    assert "DNS: api.lab-sno.lab.example.com" in run.output, run.output
    # The impossible size is one of the problems listed, not just a failed task.
    assert "- Proxmox: " in run.output, run.output
    assert site.owned_vms("lab-sno") == [], "preflight created something"


RESOLVER = REPO / "tests" / "fixtures" / "resolver" / "getent"


def preflight_with_dns(run_flow, tmp_path, cluster: str, hosts: str, tags: str = "preflight", env=None, **extra):
    """The preflight with its DNS check answered from `hosts` (the resolver double reads it as getent would)."""
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text(hosts)
    return run_flow("site.yaml", cluster, tags=tags,
                    extra={"preflight_check_dns": True, "preflight_dns_command": [str(RESOLVER), "ahosts", "--"], **extra},
                    env_more={"PROXSHIFT_TEST_HOSTS": str(hosts_file), **(env or {})})


EXAMPLE_DNS_COMPACT = ("10.30.0.5 api.lab-compact.lab.example.com api-int.lab-compact.lab.example.com\n"
                       "10.30.0.6 console-openshift-console.apps.lab-compact.lab.example.com\n")


def test_preflight_dns_checks_api_int_too(run_flow, site, tmp_path):
    hosts = ("10.30.0.5 api.lab-compact.lab.example.com\n"
             "10.30.0.6 console-openshift-console.apps.lab-compact.lab.example.com\n")
    run = preflight_with_dns(run_flow, tmp_path, "lab-compact", hosts)
    assert run.rc != 0
    dns = [line for line in run.output.splitlines() if line.startswith("- DNS: ")]
    assert len(dns) == 1 and "DNS: api-int.lab-compact.lab.example.com resolves to nothing" in dns[0], dns
    hosts += "10.30.0.5 api-int.lab-compact.lab.example.com\n"
    run = preflight_with_dns(run_flow, tmp_path, "lab-compact", hosts)
    assert run.rc == 0, run.output


def test_the_resolver_runs_with_the_allow_listed_environment_only(run_flow, site, tmp_path):
    """A command the playbooks start themselves gets the modules' allow-list, not a deny-list: cloud keys, tokens and
    any other variable of the run never reach it. (ANSIBLE_HASHI_VAULT_* would change how this run logs in to Vault
    itself; the script's own test in modules/ansible-module/src/child.rs runs it over those names.)"""
    dump = tmp_path / "env-names"
    credentials = {"AWS_SECRET_ACCESS_KEY": "a", "AWS_ACCESS_KEY_ID": "k", "AZURE_CLIENT_SECRET": "z",
                   "GITHUB_TOKEN": "g", "SOME_OTHER_SETTING": "x"}
    run = preflight_with_dns(run_flow, tmp_path, "lab-compact", EXAMPLE_DNS_COMPACT,
                             env={"PROXSHIFT_TEST_ENV_DUMP": str(dump), **credentials})
    assert run.rc == 0, run.output
    names = set(dump.read_text().split())
    assert "PATH" in names and "PROXSHIFT_TEST_HOSTS" in names, names
    assert not names & set(credentials), names & set(credentials)
    assert not {n for n in names if n.startswith(("VAULT_", "PROXMOX_", "K8S_AUTH_", "ANSIBLE_"))}, names


def test_preflight_dns_wants_every_address_of_a_dual_stack_vip(run_flow, site, tmp_path):
    """A dual-stack VIP pair (inventory/dual-stack.yml) needs its A and its AAAA record."""
    hosts = EXAMPLE_DNS["lab-dual"].replace("fd00:70::5 api.lab-dual.lab.example.com ", "fd00:70::5 ")
    run = preflight_with_dns(run_flow, tmp_path, "lab-dual", hosts)
    assert run.rc != 0
    dns = [line for line in run.output.splitlines() if line.startswith("- DNS: ")]
    assert len(dns) == 1, dns
    assert "DNS: api.lab-dual.lab.example.com resolves to 10.70.0.5" in dns[0], dns
    assert "(missing fd00:70::5)" in dns[0], dns


# The records the IPv6 examples need: AAAA only for the single-stack SNO (its node's address), A and
# AAAA for every name of the dual-stack cluster (its VIP pairs).
EXAMPLE_DNS = {
    "lab-sno6": "fd00:60::11 api.lab-sno6.lab.example.com api-int.lab-sno6.lab.example.com"
                " console-openshift-console.apps.lab-sno6.lab.example.com\n",
    "lab-dual": "10.70.0.5 api.lab-dual.lab.example.com api-int.lab-dual.lab.example.com\n"
                "fd00:70::5 api.lab-dual.lab.example.com api-int.lab-dual.lab.example.com\n"
                "10.70.0.6 console-openshift-console.apps.lab-dual.lab.example.com\n"
                "fd00:70::6 console-openshift-console.apps.lab-dual.lab.example.com\n",
}


@pytest.mark.parametrize("cluster", sorted(EXAMPLE_DNS))
def test_ipv6_examples_pass_the_preflight_render_and_satisfy_nmstatectl(cluster, run_flow, site, tmp_path):
    """inventory/ipv6-sno.yml and inventory/dual-stack.yml: the preflight (manifests valid, VMs fit, the
    AAAA records found) passes, the manifests phase renders them, and `nmstatectl gc` accepts every host's
    networkConfig, as openshift-install runs it when it builds the ISO."""
    run = preflight_with_dns(run_flow, tmp_path, cluster, EXAMPLE_DNS[cluster], tags="preflight,manifests")
    assert run.rc == 0, run.output
    install = yaml.safe_load((site.work / cluster / "install-config.yaml").read_text())
    agent = yaml.safe_load((site.work / cluster / "agent-config.yaml").read_text())
    services = install["networking"]["serviceNetwork"]
    assert len(services) == (2 if cluster == "lab-dual" else 1), install["networking"]
    assert agent["rendezvousIP"] == {"lab-sno6": "fd00:60::11", "lab-dual": "10.70.0.21"}[cluster]
    for host in agent["hosts"]:
        doc = tmp_path / f"{host['hostname']}.yml"
        doc.write_text(yaml.safe_dump(host["networkConfig"]))
        gc = subprocess.run([str(nmstatectl_bin()), "gc", str(doc)], capture_output=True, text=True, check=False)
        assert gc.returncode == 0, gc.stderr
        assert "fd00:" in gc.stdout, gc.stdout


def test_preflight_wants_nmstatectl_and_oc_where_the_installer_builds_the_iso(run_flow, site, tmp_path):
    """openshift-install checks static host networking with nmstatectl and extracts the base ISO with oc: a
    build host without them fails in preflight, naming both, before any VM is made."""
    only_installer = tmp_path / "bin"
    only_installer.mkdir()
    (only_installer / "openshift-install").symlink_to(FIXTURE_BIN / "openshift-install")
    path = ":".join([str(only_installer)] + [p for p in site.env(with_installer=True)["PATH"].split(":")
                                             if "nmstatectl" not in p and p != str(FIXTURE_BIN)])
    run = run_flow("site.yaml", "lab-sno", with_installer=True, env_more={"PATH": path})
    assert run.rc != 0
    assert "nmstatectl: not on PATH" in run.output, run.output[-3000:]
    assert "nor oc on PATH" in run.output, run.output[-3000:]
    assert site.owned_vms("lab-sno") == []


def test_interrupted_vm_phase_converges_on_rerun(run_flow, site):
    site.sim.fault({"fail_tasks": {"type": "qmcreate", "count": 1, "message": "injected: storage went away"}})
    broken = run_flow("site.yaml", "lab-compact")
    assert broken.rc != 0
    assert "injected: storage went away" in broken.output
    site.sim.clear_faults()
    fixed = run_flow("site.yaml", "lab-compact")
    assert fixed.rc == 0, fixed.output
    vms = site.owned_vms("lab-compact")
    assert sorted(vm["config"]["name"] for vm in vms) == ["lab-compact-0", "lab-compact-1", "lab-compact-2"]


def test_stop_and_start(run_flow, site):
    assert run_flow("site.yaml", "lab-sno").rc == 0
    stop = run_flow("stop.yaml", "lab-sno")
    assert stop.rc == 0, stop.output
    assert not any(vm["running"] for vm in site.owned_vms("lab-sno"))
    start = run_flow("start.yaml", "lab-sno")
    assert start.rc == 0, start.output
    assert all(vm["running"] for vm in site.owned_vms("lab-sno"))
    again = run_flow("start.yaml", "lab-sno")
    assert again.rc == 0, again.output
    assert again.changed_tasks() == []


def test_interrupted_start_phase_converges_on_rerun(run_flow, site):
    site.sim.fault({"fail_tasks": {"type": "qmstart", "count": 1, "message": "injected: start failed"}})
    broken = run_flow("site.yaml", "lab-compact")
    assert broken.rc != 0
    assert "injected: start failed" in broken.output
    site.sim.clear_faults()
    fixed = run_flow("site.yaml", "lab-compact")
    assert fixed.rc == 0, fixed.output
    assert all(vm["running"] for vm in site.owned_vms("lab-compact"))
    # Only the VM that did not start was started by the rerun.
    started = [v for v in fixed.task("proxshift.proxmox.cluster_power : Power the cluster's VMs")["vms"] if v["changed"]]
    assert len(started) == 1, started


def test_scale_out_of_a_cluster_not_installed_is_refused_before_any_vm(run_flow, site, tmp_path):
    """Joining hosts needs the installed cluster's kubeconfig from its record (flow/test_scale_out.py joins
    them end to end): without it scale.yaml refuses, naming the hosts, and creates nothing."""
    assert run_flow("site.yaml", "lab-compact").rc == 0
    extra_inventory = tmp_path / "more.yml"
    extra_inventory.write_text(
        "all:\n  children:\n    clusters:\n      children:\n        lab-compact:\n          hosts:\n"
        "            lab-compact-worker-0: {role: worker, mac: 'BC:24:11:30:00:31'}\n"
    )
    seq = site.sim.last_seq()
    run = run_flow("scale.yaml", "lab-compact", args=["-i", str(extra_inventory)])
    assert run.rc != 0
    assert "lab-compact-worker-0" in run.output and "has no kubeconfig in its record" in run.output, run.output
    assert [w for w in site.sim.writes_since(seq) if not w.startswith("GET")] == [], "nothing is created"
    names = sorted(vm["config"]["name"] for vm in site.owned_vms("lab-compact"))
    assert names == ["lab-compact-0", "lab-compact-1", "lab-compact-2"]


def test_status_reports_every_vm(run_flow, site):
    assert run_flow("site.yaml", "lab-sno").rc == 0
    run = run_flow("status.yaml", "lab-sno")
    assert run.rc == 0, run.output
    assert "lab-sno-0: running" in run.output
    assert run.changed_tasks() == []


def test_force_install_rebuilds_the_cluster(run_flow, site):
    assert run_flow("site.yaml", "lab-sno").rc == 0
    [old] = site.owned_vms("lab-sno")
    (site.work / "lab-sno" / "stale-file").write_text("from the old install")
    run = run_flow("site.yaml", "lab-sno", extra={"force_install": True})
    assert run.rc == 0, run.output
    [new] = site.owned_vms("lab-sno")
    assert new["running"]
    # A new VM (Proxmox gives every VM a new vmgenid), a fresh work folder, the bastion untouched.
    assert new["config"]["vmgenid"] != old["config"]["vmgenid"]
    assert not (site.work / "lab-sno" / "stale-file").exists()
    assert site.sim.vm(100) is not None


def test_interrupted_secrets_phase_converges_on_rerun(run_flow, site):
    # Vault unreachable: nothing is created, the message names the problem, the rerun completes.
    broken = run_flow("site.yaml", "lab-sno", extra={"vault_url": "http://127.0.0.1:9"})
    assert broken.rc != 0
    assert "127.0.0.1:9" in broken.output
    assert site.owned_vms("lab-sno") == []
    fixed = run_flow("site.yaml", "lab-sno")
    assert fixed.rc == 0, fixed.output
    assert len(site.owned_vms("lab-sno")) == 1


def test_interrupted_manifests_phase_converges_on_rerun(run_flow, site):
    # The work folder cannot be written: the manifests phase fails before any VM exists.
    site.work.mkdir(parents=True, exist_ok=True)
    (site.work / "lab-sno").write_text("a file where the cluster folder should be")
    broken = run_flow("site.yaml", "lab-sno")
    assert broken.rc != 0
    assert site.owned_vms("lab-sno") == []
    (site.work / "lab-sno").unlink()
    fixed = run_flow("site.yaml", "lab-sno")
    assert fixed.rc == 0, fixed.output
    assert (site.work / "lab-sno" / "install-config.yaml").exists()


def test_phase_hooks_run_around_their_phase_only(run_flow, site, tmp_path):
    """proxshift_hooks: the inventory's task files before/after a phase, run exactly when the phase runs."""
    log = tmp_path / "hooks.log"
    hooks = {}
    for point in ["pre_preflight", "post_preflight", "pre_vms"]:
        task_file = tmp_path / f"{point}.yml"
        task_file.write_text(f"- name: {point}\n  ansible.builtin.shell: echo {point} >> {log}\n  changed_when: false\n")
        hooks[point] = str(task_file)
    run = run_flow("site.yaml", "lab-sno", with_installer=True, tags="preflight", extra={"proxshift_hooks": hooks})
    assert run.rc == 0, run.output[-3000:]
    assert log.read_text().split() == ["pre_preflight", "post_preflight"]  # in order; the vms phase did not run

    bad = run_flow("site.yaml", "lab-sno", with_installer=True, tags="preflight",
                   extra={"proxshift_hooks": {"pre_deploy": hooks["pre_vms"], "post_vms": str(tmp_path / "nope.yml")}})
    assert bad.rc != 0
    assert "unknown hook point(s) pre_deploy" in bad.output and f"no task file at {tmp_path / 'nope.yml'}" in bad.output
    assert log.read_text().split() == ["pre_preflight", "post_preflight"]


def test_a_cluster_name_openshift_refuses_is_refused_before_any_use(run_flow, site, tmp_path):
    """A group name Ansible takes but OpenShift does not (upper case, '_', a path) stops deprovision
    before Vault is read or a folder removed."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        "all:\n  children:\n    clusters:\n      children:\n"
        "        Bad_Name:\n          hosts:\n            bad-0: {ip: 192.0.2.50}\n"
    )
    (site.work / "Bad_Name").mkdir(parents=True)
    for name in ["Bad_Name", "../../etc", "a..b"]:
        run = run_flow("deprovision.yaml", name, inventory=inventory)
        assert run.rc != 0
        assert "is not a name OpenShift accepts" in run.output, run.output
    assert (site.work / "Bad_Name").exists()
    assert site.record("Bad_Name") is None


def test_two_nodes_with_an_arbiter_build_and_boot_with_a_small_arbiter_vm(run_flow, site):
    """inventory/arbiter.yml (lab-tna, 4.20): the install-config has the arbiter pool and agent-config an
    arbiter host, the installer double (which counts arbiter hosts as validateHostsCount does) builds the
    ISO, and the arbiter's VM takes `arbiter_vm_defaults` (2 cores, 8 GiB) while the masters keep the
    cluster's 8 cores and 24 GiB."""
    run = run_flow("site.yaml", "lab-tna", with_installer=True, tags="preflight,manifests,iso,vms,start",
                   env_more={"PROXSHIFT_TEST_INSTALLER_VERSION": "4.20.4"})
    assert run.rc == 0, run.output[-4000:]
    assert site.record("lab-tna")["phase"] == "installing", site.record("lab-tna")
    vms = {vm["config"]["name"]: vm for vm in site.owned_vms("lab-tna")}
    assert sorted(vms) == ["lab-tna-arbiter-0", "lab-tna-master-0", "lab-tna-master-1"], sorted(vms)
    sizes = {name: (int(vm["config"]["cores"]), int(vm["config"]["memory"])) for name, vm in vms.items()}
    assert sizes == {"lab-tna-arbiter-0": (2, 8192), "lab-tna-master-0": (8, 24576),
                     "lab-tna-master-1": (8, 24576)}, sizes
    assert all(vm["running"] for vm in vms.values()), vms
