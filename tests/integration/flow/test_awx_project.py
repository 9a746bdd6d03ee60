"""The job as AWX runs it from a project sync: the project is a bare clone of the repository (no built
binaries: they are build output), the collections come from the built tarballs installed where an
execution environment has them, and ansible-runner runs playbooks/site.yaml with the project's own
ansible.cfg — against pvesim and OpenBao.

What this guards: ansible.cfg must not put the unbuilt checkout's collections in front of the installed
ones (it would hide every module binary), and with no built binary anywhere a task must fail saying how
to build or install, not stop the playbook with "couldn't resolve module/action".
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from unittest import mock

import ansible_runner
import pytest
import yaml

from testlib import REPO, VENV, build_collection_tarballs, install_collection_tarballs

FLOW_TAGS = "preflight,secrets,manifests,vms,start"
# What AWX's RunJob.build_env sets (awx/main/tasks/jobs.py): the pre-2.19 variable name, which
# ansible-core 2.19 no longer reads, so the project's ansible.cfg decides the collections path.
AWX_COLLECTIONS_PATHS = "/runner/requirements_collections:~/.ansible/collections:/usr/share/ansible/collections"


def bare_project(dest: Path) -> Path:
    """The files a project sync brings: what git tracks (plus new files not ignored), no build output."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_symlink():  # git checks a link out as a link (each collection's shared action)
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), dest / rel)
        elif src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    assert not (dest / "build").exists()
    assert not (dest / "ansible_collections/proxshift/proxmox/builds").exists()
    return dest


@pytest.fixture(scope="module")
def ee_collections(tmp_path_factory) -> Path:
    """A home folder whose ~/.ansible/collections holds the installed tarballs (a default collections
    path, as in an execution environment image)."""
    home = tmp_path_factory.mktemp("ee-home")
    tarballs = build_collection_tarballs(tmp_path_factory.mktemp("dist"))
    install_collection_tarballs(tarballs, home / ".ansible" / "collections")
    return home


def run_job(tmp: Path, site, cluster: str, home: Path, project: Path, with_installer: bool = True):
    pdd = tmp / "job"
    (pdd / "env").mkdir(parents=True, exist_ok=True)
    # AWX passes its job's metadata as extra vars (awx_job_id, tower_job_id, …): under AWX a missing
    # installer is a failure, not a skipped ISO.
    (pdd / "env" / "extravars").write_text(yaml.safe_dump({**site.extra_vars(cluster), "awx_job_id": 42}))
    (pdd / "env" / "envvars").write_text(yaml.safe_dump({
        **site.env(with_installer=with_installer),
        "HOME": str(home),
        "ANSIBLE_COLLECTIONS_PATHS": AWX_COLLECTIONS_PATHS,
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
        "ANSIBLE_HOME": str(home / ".ansible"),
        "PATH": f"{VENV / 'bin'}:{site.env(with_installer=with_installer).get('PATH', os.environ.get('PATH', ''))}",
    }))
    # ansible-runner runs ansible-playbook in the project folder, so the project's ansible.cfg applies;
    # no ANSIBLE_* of this process may override it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    with mock.patch.dict(os.environ, env, clear=True):
        return ansible_runner.run(
            private_data_dir=str(pdd), project_dir=str(project), playbook="playbooks/site.yaml",
            inventory=str(project / "inventory"), tags=FLOW_TAGS, quiet=True, timeout=900,
        )


def changed_tasks(job) -> list[str]:
    return [e["event_data"].get("task", "") for e in job.events
            if e["event"] == "runner_on_ok" and e["event_data"]["res"].get("changed")]


def test_bare_project_runs_on_the_installed_collections_and_converges(tmp_path, site, ee_collections):
    project = bare_project(tmp_path / "project")
    first = run_job(tmp_path / "run1", site, "lab-compact", ee_collections, project)
    out = first.stdout.read()
    assert first.status == "successful", out[-4000:]
    assert changed_tasks(first), "the first run created nothing"
    owned = site.owned_vms("lab-compact")
    assert sorted(vm["config"]["name"] for vm in owned) == ["lab-compact-0", "lab-compact-1", "lab-compact-2"]
    # The installer (required under AWX) built the agent ISO, and the VMs boot from it.
    assert all(any(".iso" in str(v) for v in vm["config"].values()) for vm in owned), [vm["config"] for vm in owned]
    # Each module ran from the installed copy: the bare project holds none of the binaries.
    assert not list((project / "ansible_collections").glob("proxshift/*/builds"))
    second = run_job(tmp_path / "run2", site, "lab-compact", ee_collections, project)
    assert second.status == "successful", second.stdout.read()[-4000:]
    assert changed_tasks(second) == []
    everything = json.dumps(list(first.events)) + out
    for secret in (site.canary, site.env()["PROXMOX_TOKEN_SECRET"], site.bao.token):
        assert secret not in everything


def test_no_built_binary_anywhere_fails_naming_the_fix(tmp_path, site):
    project = bare_project(tmp_path / "project")
    empty_home = tmp_path / "home"
    empty_home.mkdir()
    job = run_job(tmp_path / "run", site, "lab-sno", empty_home, project)
    assert job.status == "failed"
    failed = [e for e in job.events if e["event"] == "runner_on_failed"
              and not e["event_data"].get("ignore_errors")]
    assert failed, job.stdout.read()[-4000:]
    # The first module task reads the record, a no_log task: the message reaches the job output anyway.
    out = job.stdout.read()
    assert "hashicorp_vault: the module binary" in out and "is missing" in out, out[-4000:]
    assert "make build" in out and "ansible-galaxy collection install --force" in out, out[-4000:]
    # Nothing was created on Proxmox before the failure.
    assert site.owned_vms("lab-sno") == []


def test_an_awx_job_without_the_installer_fails_in_preflight(tmp_path, site, ee_collections):
    """Under AWX require_installer defaults to true: no ISO means a red job before any VM, not a green one."""
    project = bare_project(tmp_path / "project")
    job = run_job(tmp_path / "run", site, "lab-sno", ee_collections, project, with_installer=False)
    out = job.stdout.read()
    assert job.status == "failed", out[-4000:]
    failed = [e for e in job.events if e["event"] == "runner_on_failed" and not e["event_data"].get("ignore_errors")]
    assert failed and failed[-1]["event_data"]["task"].startswith("Preflight"), [e["event_data"]["task"] for e in failed]
    assert "Installer:" in out and "openshift-install" in out, out[-4000:]
    assert site.owned_vms("lab-sno") == []
