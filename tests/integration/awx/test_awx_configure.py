"""awx/configure.yml is a real awx.awx playbook: its tasks run through the real awx.awx modules (from
PyPI's `ansible` package, the venv scripts/deps/community-proxmox.sh installs), which check every
argument against their specs before calling the controller. With no controller listening, each task must
get as far as its first API request — a connection error, never an argument error.

Creating the objects in a live controller needs one (AWX cannot run here): awx/README.md marks that step.
"""
from __future__ import annotations

import json
import re
import subprocess

import pytest

from services import community_proxmox_venv
from testlib import REPO, ansible_env, free_port

AWX = REPO / "awx"
SECRETS = {
    "proxmox": "pve-token-canary-0a1b2c3d",
    "vault": "vault-token-canary-4e5f6a7b",
    "hub": "hub-bearer-canary-8c9d0e1f",
    "kubeconfig": "apiVersion: v1\nkind: Config\nclusters: []\n# hub-kubeconfig-canary-2a3b\n",
    "s3": "s3-secret-canary-6d7e8f9a",
}


def run_configure(tmp_path, extra: dict, tasks_file=AWX / "configure" / "tasks.yml"):
    """Run the tasks with ignore_errors against a closed port; the per-task results from the JSON callback."""
    venv = community_proxmox_venv()
    play = tmp_path / "wrap.yml"
    play.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n"
        f"  vars_files: ['{AWX / 'configure' / 'defaults.yml'}']\n"
        f"  tasks:\n    - ansible.builtin.import_tasks: {tasks_file}\n      ignore_errors: true\n"
    )
    extra_vars = {"proxshift_awx_dir": str(AWX), "proxshift_awx_no_log": False,
                  "ansible_python_interpreter": str(venv / "bin" / "python"), **extra}
    env = ansible_env(tmp_path, {
        "CONTROLLER_HOST": f"https://127.0.0.1:{free_port()}",
        "CONTROLLER_OAUTH_TOKEN": "controller-token-canary",
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "true",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
    }, venv=venv)
    env.pop("ANSIBLE_CALLBACKS_ENABLED")
    proc = subprocess.run([str(venv / "bin" / "ansible-playbook"), "-i", "localhost,", str(play),
                           "-e", json.dumps(extra_vars)],
                          env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = []
    for task in json.loads(proc.stdout)["plays"][0]["tasks"]:
        res = task["hosts"]["localhost"]
        items = res.get("results") or [res]
        results += [(task["task"]["name"], item) for item in items]
    return results


def outcome(results):
    """{task name: [what each item got to]}: 'api' (reached the controller), 'skipped', or the message."""
    got = {}
    for name, res in results:
        if res.get("skipped"):
            what = "skipped"
        elif re.match(r"There was an unknown error when trying to connect to https://127\.0\.0\.1:\d+/api/v2/",
                      res.get("msg", "")):
            what = "api"
        else:
            what = res.get("msg", json.dumps(res)[:300])
        got.setdefault(name, []).append(what)
    return got


@pytest.mark.parametrize("hub", ["token", "kubeconfig"])
def test_every_task_passes_the_awx_modules_argument_checks(tmp_path, hub):
    extra = {
        "proxshift_awx_proxmox": {"host": "pve.example.com", "user": "proxshift@pve", "token_id": "ansible",
                                  "token_secret": SECRETS["proxmox"]},
        "proxshift_awx_vault": {"url": "https://vault.example.com:8200", "token": SECRETS["vault"]},
    }
    if hub == "token":
        extra["proxshift_awx_hub_token"] = {"host": "https://api.hub.example.com:6443",
                                            "bearer_token": SECRETS["hub"], "ssl_ca_cert": ""}
        # The object store's credential too, in one of the two runs: made when its key is given, skipped otherwise.
        extra["proxshift_awx_object_store"] = {"access_key": "backup-writer", "secret_key": SECRETS["s3"]}
    else:
        extra["proxshift_awx_hub_kubeconfig"] = SECRETS["kubeconfig"]
    got = outcome(run_configure(tmp_path, extra))
    credential_types = sorted(p.name for p in (AWX / "credential_types").glob("*.yml"))
    job_templates = sorted(p.name for p in (AWX / "job_templates").glob("*.yml"))
    assert got.pop("Credential types (awx/credential_types/*.yml)") == ["api"] * len(credential_types)
    assert got.pop("Job templates (awx/job_templates/*.yml)") == ["api"] * len(job_templates)
    workflows = sorted(p.name for p in (AWX / "workflows").glob("*.yml"))
    assert workflows and got.pop("Workflow job templates (awx/workflows/*.yml)") == ["api"] * len(workflows)
    hub_token = got.pop("ACM hub credential (host + token)")
    hub_kubeconfig = got.pop("ACM hub credential (kubeconfig)")
    assert (hub_token, hub_kubeconfig) == ((["api"], ["skipped"]) if hub == "token" else (["skipped"], ["api"]))
    assert got.pop("Object store credential (etcd backups)") == (["api"] if hub == "token" else ["skipped"])
    assert got == {name: ["api"] for name in got}, got
    assert set(got) == {"Proxmox API token credential", "Vault token credential", "Execution environment",
                        "Project (this repository)", "Inventory", "Inventory source (the project's inventory/ folder)"}


def test_a_wrong_argument_is_caught_before_the_controller(tmp_path):
    """The check above can fail: a misspelt option stops at the module's argument spec."""
    bad = tmp_path / "bad_tasks.yml"
    bad.write_text("- name: Misspelt option\n  awx.awx.project:\n    name: ProxShift\n    scm_branchh: main\n")
    got = outcome(run_configure(tmp_path, {}, tasks_file=bad))
    [msg] = got["Misspelt option"]
    assert "Unsupported parameters" in msg and "scm_branchh" in msg, msg


def test_secrets_are_hidden_by_default():
    tasks = (AWX / "configure" / "tasks.yml").read_text()
    defaults = (AWX / "configure" / "defaults.yml").read_text()
    assert "proxshift_awx_no_log: true" in defaults
    credential_tasks = [t for t in tasks.split("\n- name: ") if "awx.awx.credential:" in t]
    assert len(credential_tasks) == 5
    assert all('no_log: "{{ proxshift_awx_no_log }}"' in t for t in credential_tasks)
