"""proxshift.proxmox.vm_lifecycle through real ansible-playbook against pvesim.

Task durations are PVE's real ones scaled by 0.1 (start 0.2 s, shutdown 0.5 s, reboot 0.8 s, guest
agent 2 s after a start), so waits and polling are really exercised.
"""
from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

from _lifecycle_fixtures import TOKEN_ID, TOKEN_SECRET, lifecycle_sim, nodes, vm  # noqa: F401 (fixture)

MODULE = "proxshift.proxmox.vm_lifecycle"


def playbook(sim, *tasks: dict) -> str:
    """A localhost play; each task is {name, args, [ignore_errors]}; args get the connection options."""
    lines = ["- hosts: localhost", "  gather_facts: false", "  tasks:"]
    for t in tasks:
        lines.append(f"    - name: {t['name']}")
        lines.append(f"      {MODULE}: {json.dumps(sim.module_args(**t['args']))}")
        if t.get("ignore_errors"):
            lines.append("      ignore_errors: true")
    return "\n".join(lines) + "\n"


def by_name(result: dict) -> dict:
    return {v["name"]: v for v in result["vms"]}


def assert_no_secret(run):
    assert TOKEN_SECRET not in run.output
    assert TOKEN_SECRET not in json.dumps(run.results)


CLUSTER = {
    "nodes": nodes("pve1", "pve2"),
    "vms": [
        vm(101, "master-0", "pve1", ips=["192.0.2.10/24"]),
        vm(102, "master-1", "pve2", ips=["192.0.2.11/24"]),
        vm(103, "master-2", "pve1", ips=["192.0.2.12/24"]),
        vm(104, "worker-0", "pve2", ips=["192.0.2.20/24"]),
        # Not ProxShift's: carries the cluster tag but not the ownership tag.
        vm(200, "bystander", "pve1", tags=("ocp1",)),
    ],
}


def test_ordered_parallel_start_waits_for_ips_and_reruns_quietly(run_playbook, lifecycle_sim):
    sim = lifecycle_sim(CLUSTER)
    args = {"tags": ["proxshift"], "state": "started", "order": ["master-0"], "parallel": 2,
            "wait_for": "ip", "wait_timeout": 60}
    run = run_playbook(playbook(sim, {"name": "boot", "args": args}), diff=True)
    assert run.rc == 0, run.output
    r = run.task("boot")
    assert r["changed"] is True
    vms = by_name(r)
    assert list(vms) == ["master-0", "master-1", "master-2", "worker-0"]
    assert vms["master-0"]["step"] == 1 and {v["step"] for v in r["vms"][1:]} == {2}
    for name, ip in [("master-0", "192.0.2.10"), ("master-1", "192.0.2.11"), ("worker-0", "192.0.2.20")]:
        assert vms[name]["ips"] == [ip], vms[name]
        assert (vms[name]["before"], vms[name]["after"], vms[name]["changed"]) == ("stopped", "running", True)
        assert vms[name]["qmpstatus"] == "running" and vms[name]["uptime"] is not None
    assert r["totals"]["changed"] == 4 and r["totals"]["running"] == 4
    # The rendezvous host went first, alone; its agent (2 s) came up before anything else started.
    posts = sim.power_posts()
    assert posts[0] == (101, "start")
    assert sorted(posts[1:]) == [(102, "start"), (103, "start"), (104, "start")]
    # Step 2 began only once the rendezvous host's agent reported its address.
    log = sim.requests()
    ready = min(r["seq"] for r in log if r["status"] == 200
                and r["path"] == "/nodes/pve1/qemu/101/agent/network-get-interfaces")
    later = [r["seq"] for r in log if r["method"] == "POST" and "/qemu/101/" not in r["path"]]
    assert later and min(later) > ready
    # parallel: 2 — the third VM of step 2 was started only once one of the first two had its address.
    starts = [(r["seq"], r["path"]) for r in log if r["method"] == "POST" and r["path"].endswith("/status/start")
              and "/qemu/101/" not in r["path"]]
    assert len(starts) == 3, starts
    first_two = [re.search(r"/qemu/(\d+)/", p).group(1) for _, p in starts[:2]]
    ready_of = [min(r["seq"] for r in log if r["status"] == 200
                    and r["path"].endswith(f"/qemu/{vmid}/agent/network-get-interfaces")) for vmid in first_two]
    assert starts[2][0] > min(ready_of), (starts, ready_of)
    assert "master-0 (101)" in run.output and "power state" in run.output  # --diff shown
    assert not sim.vm_running(200), "the unowned VM was not selected"
    assert_no_secret(run)

    sim.clear_requests()
    again = run_playbook(playbook(sim, {"name": "boot", "args": args}))
    assert again.rc == 0, again.output
    assert again.task("boot")["changed"] is False
    assert sim.writes() == [], "a rerun sends no write"
    assert by_name(again.task("boot"))["master-2"]["ips"] == ["192.0.2.12"]


def test_every_state_on_one_vm(run_playbook, lifecycle_sim):
    sim = lifecycle_sim({"nodes": nodes("pve1"), "vms": [vm(101, "sno", running=True)]})
    steps = [
        ("pause", {"state": "paused"}),
        ("pause again", {"state": "paused"}),
        ("status while paused", {"state": "status"}),
        ("start a paused vm", {"state": "started"}),
        ("restart", {"state": "restarted"}),
        ("reset", {"state": "reset"}),
        ("stop", {"state": "stopped", "timeout": 30}),
        ("stop again", {"state": "stopped"}),
        ("resume a stopped vm", {"state": "resumed"}),
        ("restart a stopped vm", {"state": "restarted"}),
        ("pause then resume", {"state": "paused"}),
        ("resume", {"state": "resumed"}),
    ]
    tasks = [{"name": n, "args": {"name": "sno", **a}, "ignore_errors": n == "resume a stopped vm"}
             for n, a in steps]
    run = run_playbook(playbook(sim, *tasks))
    assert run.rc == 0, run.output

    def one(name):
        return run.task(name)["vms"][0]

    assert (one("pause")["before"], one("pause")["after"]) == ("running", "paused")
    assert one("pause")["actions"] == ["pause"]
    assert run.task("pause again")["changed"] is False
    s = one("status while paused")
    assert (s["status"], s["qmpstatus"], s["after"]) == ("running", "paused", "paused")
    assert run.task("status while paused")["changed"] is False
    assert one("start a paused vm")["actions"] == ["resume"]
    assert one("start a paused vm")["after"] == "running"
    assert one("restart")["actions"] == ["reboot"] and run.task("restart")["changed"] is True
    assert one("reset")["actions"] == ["reset"]
    assert (one("stop")["actions"], one("stop")["after"]) == (["shutdown"], "stopped")
    assert run.task("stop again")["changed"] is False
    assert run.status("resume a stopped vm") == "failed"
    assert "use state: started" in run.task("resume a stopped vm")["msg"]
    assert one("restart a stopped vm")["actions"] == ["start"]
    assert one("resume")["after"] == "running"
    assert [a for _, a in sim.power_posts()] == [
        "suspend", "resume", "reboot", "reset", "shutdown", "start", "suspend", "resume"]


def test_check_mode_sends_nothing_and_predicts(run_playbook, lifecycle_sim):
    sim = lifecycle_sim(CLUSTER)
    sim.clear_requests()
    run = run_playbook(
        playbook(sim, {"name": "would boot", "args": {"tags": ["ocp1"], "state": "started", "wait_for": "ip"}}),
        check=True, diff=True,
    )
    assert run.rc == 0, run.output
    r = run.task("would boot")
    assert r["changed"] is True
    assert {v["after"] for v in r["vms"]} == {"running"}
    assert all(v["msg"] == "would start (check mode)" for v in r["vms"])
    assert "would change" in r["msg"]
    assert sim.writes() == [], sim.writes()
    assert not any(sim.vm_running(i) for i in (101, 102, 103, 104, 200))


def test_health_remediation_starts_owned_vms_only(run_playbook, lifecycle_sim):
    seed = dict(CLUSTER, vms=[
        vm(101, "master-0", running=True),
        vm(102, "master-1"),
        vm(200, "bystander", tags=("ocp1",)),
    ])
    sim = lifecycle_sim(seed)
    run = run_playbook(playbook(
        sim,
        {"name": "report", "args": {"tags": ["ocp1"], "state": "status"}},
        {"name": "heal", "args": {"tags": ["ocp1"], "state": "status", "remediate": True}},
        {"name": "healthy", "args": {"tags": ["ocp1"], "state": "status", "remediate": True}},
    ))
    assert run.rc == 0, run.output
    report = run.task("report")
    assert report["changed"] is False
    assert report["msg"] == "3 VMs: 1 running, 0 paused, 2 stopped"
    m0 = by_name(report)["master-0"]
    assert m0["ha"] == {"managed": False, "state": None} and m0["lock"] is None
    assert m0["node"] == "pve1" and m0["uptime"] >= 0 and m0["owned"] is True
    heal = by_name(run.task("heal"))
    assert run.task("heal")["changed"] is True
    assert (heal["master-1"]["actions"], heal["master-1"]["after"]) == (["start"], "running")
    assert heal["bystander"]["changed"] is False and heal["bystander"]["owned"] is False
    assert "not owned" in heal["bystander"]["msg"]
    assert run.task("healthy")["changed"] is False
    assert sim.power_posts() == [(102, "start")]
    assert not sim.vm_running(200)


def test_offline_node_fails_its_vms_only(run_playbook, lifecycle_sim):
    sim = lifecycle_sim(CLUSTER)
    sim.inject({"node_offline": {"node": "pve2"}})
    run = run_playbook(playbook(
        sim,
        {"name": "boot", "args": {"tags": ["proxshift"], "state": "started"}, "ignore_errors": True},
        {"name": "health", "args": {"tags": ["proxshift"], "state": "status", "ignore_unreachable": True}},
    ))
    boot = run.task("boot")
    assert run.status("boot") == "failed"
    assert boot["msg"].startswith("2 of 4 VMs failed"), boot["msg"]
    vms = by_name(boot)
    for name in ("master-1", "worker-0"):
        assert vms[name]["unreachable"] is True and vms[name]["changed"] is False
        assert "node pve2 is unreachable" in vms[name]["msg"] and "595" in vms[name]["msg"]
    for name in ("master-0", "master-2"):
        assert vms[name]["after"] == "running" and vms[name]["changed"] is True
    assert boot["changed"] is True
    health = run.task("health")
    assert run.status("health") == "ok", health
    assert health["totals"]["unreachable"] == 2
    assert any("ignore_unreachable" in w for w in health["warnings"])


def test_memory_overcommit_start_failure_is_explained(run_playbook, lifecycle_sim):
    seed = {"nodes": nodes("pve1", maxmem="10G"),
            "vms": [vm(101, "big-0", memory=6144), vm(102, "big-1", memory=6144)]}
    sim = lifecycle_sim(seed)
    run = run_playbook(playbook(
        sim, {"name": "boot", "args": {"vms": ["big-0", "big-1"], "state": "started", "parallel": 1},
              "ignore_errors": True}))
    r = run.task("boot")
    assert run.status("boot") == "failed"
    vms = by_name(r)
    assert vms["big-0"]["after"] == "running"
    bad = vms["big-1"]
    assert bad["failed"] is True and bad["after"] == "stopped"
    assert "does not have enough free memory" in bad["msg"], bad["msg"]
    assert "Cannot allocate memory" in bad["msg"]
    assert any("Cannot allocate memory" in line for line in bad["task_log"])


def test_ha_managed_vm_waits_for_the_real_state(run_playbook, lifecycle_sim):
    sim = lifecycle_sim({"nodes": nodes("pve1"), "vms": [vm(101, "ha-0", ha=True)]})
    run = run_playbook(playbook(
        sim,
        {"name": "start", "args": {"vmid": 101, "state": "started"}},
        {"name": "stop", "args": {"vmid": 101, "state": "stopped"}},
    ))
    assert run.rc == 0, run.output
    started = run.task("start")["vms"][0]
    assert started["ha"]["managed"] is True and started["after"] == "running"
    assert run.task("stop")["vms"][0]["after"] == "stopped"
    kinds = [t["type"] for t in sim.tasks()]
    assert "hastart" in kinds and "hastop" in kinds and "qmstart" not in kinds


def test_shutdown_timeout_needs_force(run_playbook, lifecycle_sim):
    sim = lifecycle_sim({"nodes": nodes("pve1"),
                         "vms": [vm(101, "stubborn", running=True, ignore_shutdown=True)]})
    run = run_playbook(playbook(
        sim,
        {"name": "graceful", "args": {"name": "stubborn", "state": "stopped", "timeout": 3},
         "ignore_errors": True},
        {"name": "forced", "args": {"name": "stubborn", "state": "stopped", "timeout": 3, "force": True}},
    ))
    g = run.task("graceful")
    assert run.status("graceful") == "failed" and g["changed"] is False
    assert "got timeout" in g["msg"], g["msg"]
    f = run.task("forced")["vms"][0]
    assert (f["before"], f["after"], f["actions"]) == ("running", "stopped", ["shutdown (forced after timeout)"])
    assert run.rc == 0, run.output


def test_wait_for_ip_times_out_clearly_and_agent_less_vms_fail_fast(run_playbook, lifecycle_sim):
    sim = lifecycle_sim({"nodes": nodes("pve1"),
                         "vms": [vm(101, "silent"), vm(102, "no-agent", agent=False)]})
    run = run_playbook(playbook(
        sim,
        {"name": "boot", "args": {"vms": [101, 102], "state": "started", "wait_for": "ip",
                                  "wait_timeout": 4}, "ignore_errors": True},
    ))
    r = by_name(run.task("boot"))
    assert r["silent"]["failed"] is True and r["silent"]["after"] == "running"
    assert "timed out after 4s (wait_timeout) waiting for a routable address" in r["silent"]["msg"]
    assert r["no-agent"]["failed"] is True and "agent: 1" in r["no-agent"]["msg"]


def test_bad_options_fail_before_any_request(run_playbook, lifecycle_sim):
    sim = lifecycle_sim(CLUSTER)
    sim.clear_requests()
    run = run_playbook(playbook(
        sim,
        {"name": "bad order", "args": {"tags": ["ocp1"], "state": "started", "order": ["nope"]},
         "ignore_errors": True},
        {"name": "remediate wrongly", "args": {"vmid": 101, "state": "started", "remediate": True},
         "ignore_errors": True},
        {"name": "ambiguous", "args": {"vmid": 101, "tags": ["x"], "state": "started"}, "ignore_errors": True},
    ))
    assert "order[0]: name 'nope' is not one of the VMs" in run.task("bad order")["msg"]
    assert "remediate applies to state: status only" in run.task("remediate wrongly")["msg"]
    assert "mutually exclusive" in run.task("ambiguous")["msg"]
    assert sim.writes() == []


def test_connection_from_module_defaults_group_and_environment(run_playbook, lifecycle_sim):
    """The flow sets the connection once per play (action group) and keeps the secret in the env."""
    sim = lifecycle_sim({"nodes": nodes("pve1"), "vms": [vm(101, "m0")]})
    pb = f"""
    - hosts: localhost
      gather_facts: false
      module_defaults:
        group/proxshift.proxmox.proxmox:
          api_host: "{sim.url}"
          api_token_id: "{TOKEN_ID}"
          ca_path: "{sim.sim.ca_path}"
      tasks:
        - name: start via group defaults
          environment:
            PROXMOX_TOKEN_SECRET: "{TOKEN_SECRET}"
          {MODULE}:
            name: m0
            state: started
        - name: the port from PROXMOX_PORT, as community.proxmox reads it
          environment:
            PROXMOX_TOKEN_SECRET: "{TOKEN_SECRET}"
            PROXMOX_PORT: "{urlsplit(sim.url).port}"
          {MODULE}:
            api_host: "{urlsplit(sim.url).hostname}"
            name: m0
            state: started
    """
    run = run_playbook(pb)
    assert run.rc == 0, run.output
    assert run.task("start via group defaults")["vms"][0]["after"] == "running"
    assert run.task("the port from PROXMOX_PORT, as community.proxmox reads it")["changed"] is False
    assert_no_secret(run)
