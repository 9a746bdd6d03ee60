"""The flow as AWX runs it: ansible-runner with a private data dir (env/extravars, env/envvars), the repo
as the project, playbooks/site.yaml, the example inventory — against pvesim and OpenBao. Asserts the job's
status, return code and events, and that no secret reaches any event or the job output.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import ansible_runner
import yaml

from testlib import REPO, VENV

FLOW_TAGS = "preflight,secrets,manifests,vms,start"


def private_data_dir(tmp: Path, site, cluster: str) -> Path:
    """What AWX writes for a job: extra vars (the survey's cluster_name and the site) and the credentials'
    injected environment."""
    pdd = tmp / "job"
    (pdd / "env").mkdir(parents=True)
    (pdd / "env" / "extravars").write_text(yaml.safe_dump(site.extra_vars(cluster)))
    (pdd / "env" / "envvars").write_text(yaml.safe_dump({
        **site.env(),
        "ANSIBLE_COLLECTIONS_PATH": str(REPO),
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
        "ANSIBLE_HOME": str(tmp / "ansible-home"),
        "PATH": f"{VENV / 'bin'}:{os.environ.get('PATH', '')}",
    }))
    return pdd


def run_job(tmp: Path, site, cluster: str):
    return ansible_runner.run(
        private_data_dir=str(private_data_dir(tmp, site, cluster)),
        project_dir=str(REPO),
        playbook="playbooks/site.yaml",
        inventory=str(REPO / "inventory"),
        tags=FLOW_TAGS,
        quiet=True,
        timeout=900,
    )


def playbook_event_kinds(events: list[dict]) -> list[str]:
    """The playbook's own events in stream order: everything but the free-text `verbose`, `debug`,
    `deprecated`, `warning` and `error` lines a run may interleave anywhere."""
    chatter = {"verbose", "debug", "deprecated", "warning", "error", "system_warning"}
    return [e["event"] for e in events if e["event"] not in chatter]


def test_playbook_event_kinds_ignore_interleaved_chatter():
    events = [{"event": k} for k in ("verbose", "playbook_on_start", "verbose", "playbook_on_play_start",
                                      "playbook_on_task_start", "runner_on_ok", "warning", "playbook_on_stats",
                                      "verbose")]
    assert playbook_event_kinds(events) == ["playbook_on_start", "playbook_on_play_start",
                                            "playbook_on_task_start", "runner_on_ok", "playbook_on_stats"]


def test_site_through_ansible_runner(tmp_path, site):
    job = run_job(tmp_path, site, "lab-compact")
    stdout = job.stdout.read()
    assert job.status == "successful", stdout[-4000:]
    assert job.rc == 0
    events = list(job.events)
    # ansible-runner (like AWX's stream) may emit `verbose` events (warnings, deprecations) before
    # playbook_on_start and between tasks: what matters is the playbook's own events and their order.
    kinds = playbook_event_kinds(events)
    assert kinds[0] == "playbook_on_start" and kinds[-1] == "playbook_on_stats", kinds[:3] + kinds[-3:]
    assert kinds.index("playbook_on_play_start") < kinds.index("playbook_on_task_start"), kinds[:6]
    stats = next(e for e in events if e["event"] == "playbook_on_stats")["event_data"]
    assert stats["failures"] == {} and stats["dark"] == {}, stats
    assert stats["changed"].get("localhost", 0) > 0, stats
    # The VM phase ran the Rust module and created the three VMs it reports.
    vm_tasks = [e for e in events if e["event"] == "runner_on_ok"
                and e["event_data"].get("resolved_action") == "proxshift.proxmox.proxmox_vm"
                and e["event_data"]["res"].get("changed")]
    assert vm_tasks, "no changed proxmox_vm event"
    owned = site.owned_vms("lab-compact")
    assert sorted(vm["config"]["name"] for vm in owned) == ["lab-compact-0", "lab-compact-1", "lab-compact-2"]
    assert all(vm["running"] for vm in owned)
    # Secrets reach neither the events nor the job output.
    everything = json.dumps(events) + stdout
    # (The SSH key is public and shows in the rendered manifests; it is not checked.)
    for secret in (site.canary, site.env()["PROXMOX_TOKEN_SECRET"], site.bao.token):
        assert secret not in everything


def test_failed_job_reports_the_failing_task(tmp_path, site):
    site.sim.fault({"fail_tasks": {"type": "qmcreate", "count": 5, "message": "injected: storage went away"}})
    job = run_job(tmp_path, site, "lab-sno")
    assert job.status == "failed"
    assert job.rc != 0
    failed = [e for e in job.events if e["event"] == "runner_on_failed" and not e["event_data"].get("ignore_errors")]
    assert failed, [e["event"] for e in job.events]
    assert "injected: storage went away" in json.dumps(failed[-1]["event_data"]["res"])
    assert job.stats["failures"] == {"localhost": 1}
