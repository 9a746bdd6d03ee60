"""The ansible-module protocol under real ansible-playbook, through the test-only probe module, and
the bad-input contract of every product module binary."""
from __future__ import annotations

import json
import subprocess

import pytest

from testlib import MODULE_BINARIES, ansible_env, module_binary, tool

CANARY = "canary-Zx81-secret"


def probe_play(path, extra: str = "", **task_args) -> str:
    args = {"path": str(path), **task_args}
    return f"""
- hosts: localhost
  gather_facts: false
  tasks:
    - name: probe
      proxshift_test.probe.protocol_probe: {json.dumps(args)}
      register: probe
{extra}
"""


def test_changes_then_idempotent(run_playbook, tmp_path):
    target = tmp_path / "file.txt"
    first = run_playbook(probe_play(target, content="hello"))
    assert first.rc == 0, first.output
    assert first.task("probe")["changed"] is True
    assert target.read_text() == "hello"
    second = run_playbook(probe_play(target, content="hello"))
    assert second.rc == 0, second.output
    assert second.task("probe")["changed"] is False


def test_check_mode_predicts_and_writes_nothing(run_playbook, tmp_path):
    target = tmp_path / "file.txt"
    run = run_playbook(probe_play(target, content="hello"), check=True)
    assert run.rc == 0, run.output
    result = run.task("probe")
    assert result["changed"] is True
    assert result["check_mode"] is True
    assert not target.exists()


def test_diff_renders(run_playbook, tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("old line\n")
    run = run_playbook(probe_play(target, content="new line\n"), diff=True)
    assert run.rc == 0, run.output
    assert "--- before: " in run.stdout and "+++ after: " in run.stdout, run.stdout
    assert "-old line" in run.stdout and "+new line" in run.stdout, run.stdout


# ansible-core 2.21 adds `invocation` to results only when asked (INJECT_INVOCATION, default off, sent to
# modules as `_ansible_inject_invocation`); older cores always expect it. Tests that read it ask for it.
INJECT_INVOCATION = {"ANSIBLE_INJECT_INVOCATION": "true"}


def test_invocation_follows_the_controller(run_playbook, tmp_path, ansible_core):
    default = run_playbook(probe_play(tmp_path / "f", content="x"))
    assert default.rc == 0, default.output
    asks_for_it = tuple(map(int, ansible_core.version.split(".")[:2])) >= (2, 21)
    assert ("invocation" in default.task("probe")) is not asks_for_it, default.task("probe")
    asked = run_playbook(probe_play(tmp_path / "f", content="x"), env=INJECT_INVOCATION)
    assert asked.task("probe")["invocation"]["module_args"]["content"] == "x"


def test_no_deprecation_warnings(run_playbook, tmp_path):
    # ansible_env turns deprecation warnings on; nothing the suite's plays or the modules use is deprecated
    # in any supported ansible-core.
    run = run_playbook(probe_play(tmp_path / "f", content="x", secret=CANARY), diff=True, check=True)
    assert run.rc == 0, run.output
    assert "DEPRECATION" not in run.output, run.output


def test_no_log_value_never_shown_even_at_vvv(run_playbook, tmp_path):
    target = tmp_path / "file.txt"
    ok = run_playbook(probe_play(target, content="x", secret=CANARY), verbosity=3, env=INJECT_INVOCATION)
    assert ok.rc == 0, ok.output
    assert CANARY not in ok.output
    assert ok.task("probe")["secret_echo"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert ok.task("probe")["invocation"]["module_args"]["secret"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert "module_args" in ok.stdout  # -vvv shows invocation, masked

    failed = run_playbook(probe_play(target, mode="fail", secret=CANARY), verbosity=3)
    assert failed.rc != 0
    assert CANARY not in failed.output
    assert "login failed with secret ********" in failed.output


def test_no_log_value_from_env_fallback_is_masked(run_playbook, tmp_path):
    run = run_playbook(probe_play(tmp_path / "f", mode="fail"), env={"PROBE_SECRET": CANARY}, verbosity=3)
    assert run.rc != 0
    assert CANARY not in run.output
    assert run.task("probe")["echo"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"


def test_bad_options_fail_naming_each(run_playbook, tmp_path):
    run = run_playbook(probe_play(tmp_path / "f", count="many", mode="sideways", bogus_option=1))
    assert run.rc != 0
    assert run.status("probe") == "failed"
    msg = run.task("probe")["msg"]
    assert "Unsupported parameters for (proxshift_test.probe.protocol_probe) module: bogus_option" in msg
    assert "Supported parameters include:" in msg
    assert "argument 'count'" in msg
    assert "value of mode must be one of: ok, fail, panic, got: sideways" in msg


def test_types_are_coerced_like_ansible_module(run_playbook, tmp_path):
    # Ad-hoc style strings for int, list, and nested bool.
    run = run_playbook(
        probe_play(tmp_path / "f", content="c", count="7", flags="a,b", settings={"name": "n", "enabled": "no"})
    )
    assert run.rc == 0, run.output
    r = run.task("probe")
    assert r["count"] == 7
    assert r["flags"] == ["a", "b"]
    assert r["settings"] == {"name": "n", "enabled": False}


def test_panic_becomes_a_clean_failure(run_playbook, tmp_path):
    run = run_playbook(probe_play(tmp_path / "f", mode="panic"))
    assert run.rc != 0
    assert run.status("probe") == "failed"
    result = run.task("probe")
    assert "internal error" in result["msg"] and "probe was asked to panic" in result["msg"]
    assert "deserialization" not in run.output


def test_module_defaults_group_reaches_the_binary(run_playbook, tmp_path):
    play = f"""
- hosts: localhost
  gather_facts: false
  module_defaults:
    group/proxshift_test.probe.probe:
      api_host: pve.example.test
  tasks:
    - name: probe
      proxshift_test.probe.protocol_probe:
        path: {tmp_path / 'f'}
"""
    run = run_playbook(play)
    assert run.rc == 0, run.output
    assert run.task("probe")["api_host"] == "pve.example.test"


def test_product_collections_define_action_groups(run_playbook, tmp_path):
    # Defaults for the proxmox group reach proxmox_vm: the argument reaches the binary (which then
    # either uses it or rejects other missing options, but never reports it as unsupported).
    play = """
- hosts: localhost
  gather_facts: false
  module_defaults:
    group/proxshift.proxmox.proxmox:
      api_host: pve.example.test
  tasks:
    - name: vm
      proxshift.proxmox.proxmox_vm: {}
      ignore_errors: true
"""
    run = run_playbook(play, env=INJECT_INVOCATION)
    result = run.task("vm")
    assert result["invocation"]["module_args"]["api_host"] == "pve.example.test", result


@pytest.mark.parametrize("module", sorted(MODULE_BINARIES))
def test_ansible_doc_renders_sidecar(module, tmp_path, ansible_venv):
    fqcn = f"proxshift.{MODULE_BINARIES[module]}.{module}"
    proc = subprocess.run(
        [tool("ansible-doc", ansible_venv), fqcn], env=ansible_env(tmp_path, venv=ansible_venv),
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"({fqcn})" in proc.stdout or fqcn in proc.stdout
    assert "OPTIONS" in proc.stdout and "EXAMPLES" in proc.stdout and "RETURN VALUES" in proc.stdout


@pytest.mark.parametrize("module", sorted(MODULE_BINARIES))
def test_bad_input_gives_failed_json(module, run_module):
    result, rc, _ = run_module(module, None)
    assert rc == 1 and result["failed"] is True and "arguments file" in result["msg"]

    result, rc, _ = run_module(module, "{not json")
    assert rc == 1 and result["failed"] is True and "not valid JSON" in result["msg"]

    result, rc, _ = run_module(module, "[]")
    assert rc == 1 and "JSON object" in result["msg"]

    result, rc, stdout = run_module(module, {"surely_not_an_option": 1, "_ansible_check_mode": True})
    assert rc == 1 and result["failed"] is True
    assert "surely_not_an_option" in result["msg"] and "Supported parameters include" in result["msg"]
    assert stdout.count("\n") == 1  # exactly one JSON object, nothing else


@pytest.mark.parametrize("module", sorted(MODULE_BINARIES))
def test_argument_spec_is_published(module):
    proc = subprocess.run([str(module_binary(module)), "--argument-spec"], capture_output=True, text=True)
    assert proc.returncode == 0
    spec = json.loads(proc.stdout)
    assert isinstance(spec, dict) and spec


def test_plugins_send_what_the_task_and_the_source_set(run_playbook, tmp_path, ansible_venv):
    """The lookup and the inventory plugin hand their binary the options a task (keywords, variables) or an
    inventory source sets, on every core: ansible-core < 2.18 works an option's origin out again from the config
    alone, so a required `url` given there was "not provided" and the plugins failed before the binary ran. The
    binary's own error (no token file, a refused connection) shows it got them."""
    run = run_playbook(f"""
- hosts: localhost
  gather_facts: false
  tasks:
    - name: lookup
      ansible.builtin.debug:
        msg: "{{{{ lookup('proxshift.hashi_vault.kv', 'x', url='http://127.0.0.1:9') }}}}"
      vars:
        ansible_hashi_vault_token_path: "{{{{ '{tmp_path}' }}}}"
        ansible_hashi_vault_token_file: absent-token
      ignore_errors: true
""")
    msg = run.task("lookup")["msg"]
    assert "no token was found" in msg and f"{tmp_path}/absent-token" in msg, msg
    source = tmp_path / "proxmox.yml"
    source.write_text("plugin: proxshift.proxmox.proxmox\nurl: https://127.0.0.1:9\ntoken_id: a@pve!b\n"
                      "token_secret: 0d1e2f30-unused-secret\n")
    proc = subprocess.run([str(ansible_venv / "bin" / "ansible-inventory"), "-i", str(source), "--list"],
                          env=ansible_env(tmp_path, venv=ansible_venv), capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert "127.0.0.1:9/api2/json/cluster/resources" in out and "Connection refused" in out, out
