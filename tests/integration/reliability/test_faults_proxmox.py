"""Fault matrix, Proxmox side: each fault is injected through pvesim's admin API (or by a broken
connection), the real playbook must fail with a clear message naming the cause (or succeed after a
retry), and a rerun once the fault is cleared must converge to exactly the requested VM — no orphan, no
half-configured VM — and change nothing on a second pass.
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Callable

import pytest

from services import PveSim
from testlib import free_port

from reliability_lib import EXPIRED_TOKEN_ID, EXPIRED_TOKEN_SECRET

UNRELATED_CA = Path(__file__).with_name("unrelated-ca.pem")
NAME, VMID, MAC = "rel-0", 4300, "BC:24:11:00:43:00"
ISO = "local:iso/agent.x86_64.iso"


def vm_args(**over) -> dict:
    args = {
        "name": NAME, "node": "pve1", "vmid_range": [VMID, VMID + 99], "owner_tag": "rel",
        "memory": 4096, "cores": 2,
        "disks": [{"slot": "scsi0", "storage": "local-lvm", "size": "20G"}],
        "nics": [{"slot": "net0", "bridge": "vmbr0", "mac": MAC}],
        "cdrom": {"iso": ISO},
    }
    args.update(over)
    return args


def conn(sim: PveSim, **over) -> dict:
    c = {"api_host": sim.host, "api_port": sim.port, "api_token_id": sim.token_id,
         "api_token_secret": sim.token_secret, "ca_path": str(sim.ca_path)}
    c.update(over)
    return {k: v for k, v in c.items() if v is not None}


def play(*tasks: dict) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": list(tasks)}])


def vm_task(name: str, sim: PveSim, conn_over: dict | None = None, **over) -> dict:
    return {"name": name, "proxshift.proxmox.proxmox_vm": {**conn(sim, **(conn_over or {})), **vm_args(**over)},
            "ignore_errors": True}


def start_task(name: str, sim: PveSim, **over) -> dict:
    return {"name": name, "proxshift.proxmox.vm_lifecycle": {**conn(sim), "name": NAME, "state": "started", **over},
            "ignore_errors": True}


@dataclasses.dataclass
class Case:
    id: str
    inject: Callable[[PveSim], None]
    # The task(s) that meet the fault; `fault_play(sim)` → list of task dicts.
    fault_play: Callable[[PveSim], list]
    # Regexes the failed task's msg must match; None = the fault must be retried to success.
    expect: list[str] | None
    clear: Callable[[PveSim], None] = lambda sim: sim.clear_faults()
    # VM state right after the fault: "none" (nothing created), "complete" (the full VM), "any".
    after_fault: str = "none"
    prepare: bool = False  # converge the VM once before injecting
    start: bool = False  # the rerun also starts the VM (and checks it runs)
    final: dict = dataclasses.field(default_factory=dict)  # option overrides of the converged VM


def fault(**f):
    return lambda sim: sim.fault(f)


def set_options(**o):
    def apply(sim: PveSim):
        status, body = sim.admin("PUT", "options", o)
        assert status == 200, body
    return apply


def unlock(sim: PveSim):
    sim.clear_faults()
    # `qm unlock`: a root@pam session's privilege (lock is in none of qemu-server's option tables).
    sim.root_api("PUT", f"nodes/pve1/qemu/{VMID}/config", form={"delete": "lock"})


def both(*fns):
    def run(sim):
        for f in fns:
            f(sim)
    return run


# A full clone of the lab's template (32G disk, grown to 40G).
CLONE = {"clone": {"name": "rhcos-template", "full": True, "storage": "local-lvm"},
         "disks": [{"slot": "scsi0", "storage": "local-lvm", "size": "40G"}]}

CASES = [
    Case("task-error", fault(fail_tasks={"type": "qmcreate", "count": 1, "message": "unable to create VM 4300 - lvcreate failed"}),
         lambda s: [vm_task("Converge", s)], [r"lvcreate failed"]),
    Case("http-500", fault(http_error={"path": "/nodes/pve1/qemu", "method": "POST", "status": 500,
                                       "message": "injected internal error", "count": 5}),
         lambda s: [vm_task("Converge", s)], [r"injected internal error", r"500"]),
    Case("http-500-old-error-body", both(set_options(error_message=False),
                                         fault(http_error={"path": "/nodes/pve1/qemu", "method": "POST", "status": 500,
                                                           "message": "old style failure text", "count": 5})),
         lambda s: [vm_task("Converge", s)], [r"old style failure text"],
         clear=both(lambda s: s.clear_faults(), set_options(error_message=True))),
    Case("http-503-transient", fault(http_error={"path": "/cluster/resources", "status": 503,
                                                 "message": "Service Unavailable", "count": 2}),
         lambda s: [vm_task("Converge", s)], None, after_fault="complete"),
    Case("node-offline-595", fault(node_offline={"node": "pve1"}),
         lambda s: [vm_task("Converge", s)], [r"node 'pve1' is offline"],
         clear=fault(node_offline={"node": "pve1", "offline": False})),
    Case("stale-config-lock", fault(stale_lock={"vmid": VMID, "lock": "backup"}),
         lambda s: [vm_task("Converge", s, cores=4, timeouts={"lock": 2})], [r"lock", r"backup"],
         clear=unlock, prepare=True, after_fault="any", final={"cores": 4}),
    # Another worker holds the config file lock longer than the module's retries last: a clear
    # lock-timeout error, nothing staged (qemu-server stages under the lock), and the rerun applies it.
    Case("file-lock-contention", fault(hold_file_lock={"vmid": VMID, "seconds": 60}),
         lambda s: [vm_task("Converge", s, cores=6)], [r"can't lock file '/var/lock/qemu-server/lock-4300.conf'"],
         clear=fault(hold_file_lock={"vmid": VMID, "seconds": 0}), prepare=True, after_fault="any",
         final={"cores": 6}),
    Case("full-storage", fault(fill_storage={"node": "pve1", "storage": "local-lvm", "free": 0}),
         lambda s: [vm_task("Converge", s)], [r"storage 'local-lvm' on node 'pve1' has 0\.0 GiB free"],
         clear=fault(fill_storage={"node": "pve1", "storage": "local-lvm", "free": 10**15})),
    Case("api-latency-past-timeout", fault(latency={"ms": 4000, "count": 0}),
         lambda s: [vm_task("Converge", s, conn_over={"api_timeout": 1})], [r"(?i)timed? ?out"]),
    # The rerun starts while the timed-out qmcreate still runs (VM 4300 is a bare `lock: create`):
    # it must wait for it rather than create a second VM.
    Case("slow-task-past-timeout", set_options(time_scale=3.0),
         lambda s: [vm_task("Converge", s, timeouts={"create": 1})],
         [r"timed out after 1s waiting for task qmcreate", r"rerun to converge VM 4300"],
         clear=lambda s: None, after_fault="any"),
    Case("no-quorum", set_options(quorate=False),
         lambda s: [vm_task("Converge", s)], [r"(?i)quorum"], clear=set_options(quorate=True)),
    Case("connection-refused", lambda s: None,
         lambda s: [vm_task("Converge", s, conn_over={"api_port": free_port()})], [r"(?i)connect", r"(?i)refused"]),
    Case("tls-wrong-ca", lambda s: None,
         lambda s: [vm_task("Converge", s, conn_over={"ca_path": str(UNRELATED_CA)})], [r"(?i)certificate"]),
    Case("expired-token", lambda s: None,
         lambda s: [vm_task("Converge", s, conn_over={"api_token_id": EXPIRED_TOKEN_ID,
                                                      "api_token_secret": EXPIRED_TOKEN_SECRET})],
         [r"HTTP 401", r"Authentication failed"]),
    Case("invalid-ticket-password", lambda s: None,
         lambda s: [vm_task("Converge", s, conn_over={"api_token_id": None, "api_token_secret": None,
                                                      "api_user": "root@pam", "api_password": "wrong-password-canary-1f"})],
         [r"(?i)authentication failure|401"]),
    Case("acl-403", lambda s: None,
         lambda s: [vm_task("Converge", s, conn_over={"api_token_id": None, "api_token_secret": None,
                                                      "api_user": "auditor@pve", "api_password": "pvesim-auditor-password"})],
         [r"403", r"Permission check failed"]),
    Case("missing-iso", lambda s: None,
         lambda s: [vm_task("Converge", s, cdrom={"iso": "local:iso/missing.iso"})], [r"missing\.iso"]),
    Case("clone-task-error", fault(fail_tasks={"type": "qmclone", "count": 1, "message": "clone failed: injected copy error"}),
         lambda s: [vm_task("Converge", s, **CLONE)], [r"clone failed: injected copy error"], final=CLONE),
    Case("start-task-error", fault(fail_tasks={"type": "qmstart", "count": 1, "message": "start failed: injected QEMU error"}),
         lambda s: [start_task("Start", s)], [r"start failed: injected QEMU error"],
         prepare=True, after_fault="complete", start=True),
    Case("memory-overcommit-at-start", set_options(check_memory_on_start=True),
         lambda s: [vm_task("Converge", s, memory=200 * 1024, allow_overcommit=True), start_task("Start", s)],
         [r"(?i)memory"], clear=lambda s: None, after_fault="any", start=True),
]


def converged(sim: PveSim, final: dict) -> dict:
    """The one VM named NAME, fully configured as requested; returns its config."""
    named = [vm for vm in sim.state()["vms"] if vm["config"].get("name") == NAME]
    assert len(named) == 1, f"expected exactly one {NAME}: {named}"
    vm = named[0]
    cfg = {k: str(v) for k, v in vm["config"].items()}
    assert vm["vmid"] == VMID
    assert "lock" not in cfg, cfg
    assert "rel" in cfg.get("tags", "").split(";"), cfg
    assert cfg["memory"] == str(final.get("memory", 4096)) and cfg["cores"] == str(final.get("cores", 2)), cfg
    size = final.get("disks", [{"size": "20G"}])[0]["size"]
    assert MAC in cfg["net0"] and f"size={size}" in cfg["scsi0"], cfg
    assert ISO in cfg.get("ide2", ""), cfg
    return vm


def failed_msg(run, name: str) -> str:
    assert run.status(name) == "failed", f"{name} did not fail:\n{run.output}"
    msg = run.task(name)["msg"]
    # A per-VM failure of a multi-VM result names the VM; the task msg carries the cause.
    return msg + " " + " ".join(v.get("msg", "") for v in run.task(name).get("vms", []) if isinstance(v, dict))


def _id(c) -> str:
    return (c.values[0] if hasattr(c, "values") else c).id


def wait_for_tasks(sim: PveSim, polls: int = 300):
    """Until no simulator task is running (a timed-out task goes on in the background); bounded by a
    number of polls, not by a clock."""
    import time

    for _ in range(polls):
        if not any(t.get("status") == "running" for t in sim.admin("GET", "tasks")[1]):
            return
        time.sleep(0.2)
    pytest.fail("simulator tasks still running")


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_fault_gives_a_clear_result_and_the_rerun_converges(case: Case, sim, run_playbook):
    if case.prepare:
        run = run_playbook(play(vm_task("Prepare", sim)))
        assert run.status("Prepare") == "ok", run.output
    case.inject(sim)
    run = run_playbook(play(*case.fault_play(sim)))
    names = [t["name"] for t in case.fault_play(sim)]
    if case.expect is None:
        for n in names:
            assert run.status(n) == "ok", f"{case.id}: not retried to success:\n{run.output}"
    else:
        failing = next((n for n in names if run.status(n) == "failed"), None)
        assert failing, f"{case.id}: no task failed:\n{run.output}"
        msg = failed_msg(run, failing)
        for rx in case.expect:
            assert re.search(rx, msg), f"{case.id}: {rx!r} not in {msg!r}"
        assert "Traceback" not in run.output and "panicked" not in run.output, run.output
    # No orphan and no half-configured VM while the fault is still there.
    vms = [vm for vm in sim.state()["vms"] if vm["config"].get("name") == NAME]
    if case.after_fault == "none" and not case.prepare:
        assert vms == [], f"{case.id}: a failed run left {vms}"
    elif case.after_fault == "complete":
        converged(sim, {})
    else:
        assert len(vms) <= 1, vms

    case.clear(sim)
    final = dict(case.final)
    rerun = [vm_task("Rerun", sim, **final), vm_task("Again", sim, **final)]
    if case.start:
        rerun.insert(1, start_task("Start", sim))
    if case.id == "memory-overcommit-at-start":
        # The fix is a VM that fits: converging its memory back is a config change, then it starts.
        rerun[0] = vm_task("Rerun", sim, memory=4096, apply_pending="reboot")
    run = run_playbook(play(*rerun))
    for t in rerun:
        assert run.status(t["name"]) == "ok", f"{case.id}: rerun task {t['name']} failed:\n{run.output}"
    assert run.task("Again")["changed"] is False, run.task("Again")
    wait_for_tasks(sim)
    vm = converged(sim, final)
    if case.start:
        assert vm["running"] is True
    tasks = sim.admin("GET", "tasks")[1]
    # (A clone's task carries the template's id, so count every successful create or clone: this test
    # makes exactly one VM.)
    creates = [t for t in tasks if t.get("type") in ("qmcreate", "qmclone") and t.get("exitstatus") == "OK"]
    assert len(creates) == 1, f"{case.id}: the VM was created {len(creates)} times: {creates}"
