"""The `proxshift.hashi_vault.kv` lookup and the `hashicorp_vault_info` module with real ansible-playbook
against a real OpenBao: KV v1 and v2, a version, a missing key with and without default, AppRole auth,
values marked unsafe, a sealed server; the module in check mode; ansible-doc of the lookup; the lookup's options
resolved once, by Ansible."""
from __future__ import annotations

import subprocess
import time

import pytest

from services import running_openbao
import json

from testlib import ansible_env, collection_binary, tool

APPROLE_SECRET_ID_CANARY = "approle-secret-id-canary-2b7c"
PULL_SECRET_CANARY = "pull-secret-canary-value-81f3"


def play(tasks: str) -> str:
    body = "\n".join("    " + line for line in tasks.strip("\n").splitlines())
    return f"- hosts: localhost\n  gather_facts: false\n  tasks:\n{body}\n"


@pytest.fixture(scope="module")
def bao(tmp_path_factory):
    """One OpenBao for the module: KV v2 at secret/ (two versions of one secret), KV v1 at kv1/, AppRole."""
    with running_openbao(tmp_path_factory.mktemp("bao")) as server:
        assert server.api("POST", "sys/mounts/kv1", {"type": "kv", "options": {"version": "1"}})[0] == 204
        assert server.api("POST", "kv1/app/db", {"user": "app", "password": "kv1-pw"})[0] == 204
        for _ in range(300):  # a fresh KV v2 mount answers 400 "upgrading" for a moment
            status, _ = server.api("POST", "secret/data/openshift/pull-secret",
                                   {"data": {"pullSecret": "old-value", "template": "{{ 6 * 7 }}"}})
            if status == 200:
                break
            time.sleep(0.1)
        server.kv_put("openshift/pull-secret", {"pullSecret": PULL_SECRET_CANARY, "template": "{{ 6 * 7 }}"})
        server.approle_id = server.approle(
            "reader", 'path "secret/data/openshift/*" { capabilities = ["read"] }\n'
                      'path "sys/internal/ui/mounts/*" { capabilities = ["read"] }', APPROLE_SECRET_ID_CANARY)
        yield server


def env_for(server) -> dict:
    return {"VAULT_ADDR": server.addr, "VAULT_TOKEN": server.token}


def test_kv2_kv1_versions_and_defaults(bao, run_playbook):
    run = run_playbook(play("""
- name: latest
  ansible.builtin.set_fact:
    latest: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', key='pullSecret') }}"
  no_log: true
- name: version 1
  ansible.builtin.set_fact:
    first: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', key='pullSecret', version=1) }}"
- name: kv1 whole secret, two terms
  ansible.builtin.set_fact:
    kv1: "{{ query('proxshift.hashi_vault.kv', 'app/db', 'app/db', engine_mount_point='kv1') }}"
- name: missing key with default
  ansible.builtin.set_fact:
    dflt: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', key='nope', default='fallback') }}"
    none_dflt: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/absent', default=None) }}"
- name: never templated again
  ansible.builtin.set_fact:
    raw: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', key='template') }}"
- name: with metadata
  ansible.builtin.set_fact:
    meta: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', key='template', version=1,
                     return_metadata=true) }}"
    meta_kv1: "{{ lookup('proxshift.hashi_vault.kv', 'app/db', key='user', engine_mount_point='kv1',
                         return_metadata=true) }}"
- name: compare
  ansible.builtin.assert:
    that:
      - latest == pull_secret
      - first == 'old-value'
      - meta.data == raw and meta.metadata.version == 1 and 'created_time' in meta.metadata
      - "meta_kv1 == {'data': 'app', 'metadata': none}"
      - "kv1 == [{'user': 'app', 'password': 'kv1-pw'}] * 2"
      - dflt == 'fallback'
      - none_dflt is none
"""), env=env_for(bao), extra_vars={"pull_secret": PULL_SECRET_CANARY})
    assert run.rc == 0, run.output
    assert run.status("compare") == "ok"
    # The secret's text, not 42: lookup values are unsafe and never rendered again.
    assert run.task("never templated again")["ansible_facts"]["raw"] == "{{ 6 * 7 }}"


def test_missing_key_without_default_is_a_clear_error(bao, run_playbook):
    run = run_playbook(play("""
- name: missing key
  ansible.builtin.debug:
    msg: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', key='nope') }}"
- name: version of a KV v1 mount
  ansible.builtin.debug:
    msg: "{{ lookup('proxshift.hashi_vault.kv', 'app/db', engine_mount_point='kv1', version=2) }}"
  ignore_errors: true
"""), env=env_for(bao))
    assert run.rc != 0
    msg = run.task("missing key")["msg"]
    assert "the secret at secret/openshift/pull-secret has no key 'nope' (set default to allow this)" in msg, msg


def test_approle_auth_and_token_files_from_variables(bao, run_playbook, tmp_path):
    """AppRole from variables; the token file in community.hashi_vault's form (token_path a directory, token_file
    the name in it, from ANSIBLE_HASHI_VAULT_TOKEN_PATH, ansible_hashi_vault_token_* vars or options) and in
    ProxShift's earlier one (token_path the file)."""
    env_dir, var_dir = tmp_path / "env-tokens", tmp_path / "var-tokens"
    env_dir.mkdir()
    var_dir.mkdir()
    (env_dir / ".vault-token").write_text(bao.token + "\n")
    (var_dir / "ci-token").write_text(bao.token)
    run = run_playbook(play("""
- name: via approle
  ansible.builtin.set_fact:
    value: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', key='pullSecret',
                      auth_method='approle', role_id=role_id) }}"
  vars:
    proxshift_vault_url: "{{ addr }}"
    proxshift_vault_secret_id: "{{ secret_id }}"
  no_log: true
- name: token files
  ansible.builtin.set_fact:
    from_env_dir: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', key='pullSecret', url=addr) }}"
    from_file_path: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', key='pullSecret', url=addr,
                               token_path=var_dir ~ '/ci-token') }}"
  no_log: true
- name: token file named in a token_path directory
  ansible.builtin.set_fact:
    from_vars: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', key='pullSecret', url=addr) }}"
  vars:
    ansible_hashi_vault_token_path: "{{ var_dir }}"
    ansible_hashi_vault_token_file: ci-token
  no_log: true
- name: check
  ansible.builtin.assert:
    that: [value == expected, from_env_dir == expected, from_vars == expected, from_file_path == expected]
- name: absent token file
  ansible.builtin.debug:
    msg: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', url=addr, token_file='absent') }}"
  ignore_errors: true
- name: outside the policy
  ansible.builtin.debug:
    msg: "{{ lookup('proxshift.hashi_vault.kv', 'app/db', engine_mount_point='kv1', kv_version=1,
                    auth_method='approle', role_id=role_id, secret_id=secret_id, url=addr) }}"
"""), env={"ANSIBLE_HASHI_VAULT_TOKEN_PATH": str(env_dir)},
        extra_vars={"addr": bao.addr, "role_id": bao.approle_id, "secret_id": APPROLE_SECRET_ID_CANARY,
                    "expected": PULL_SECRET_CANARY, "var_dir": str(var_dir)}, verbosity=3)
    assert run.status("check") == "ok", [(r["task"], r.get("failed")) for r in run.results]
    msg = run.task("absent token file")["msg"]
    # token_file joins the directory from ANSIBLE_HASHI_VAULT_TOKEN_PATH; the message names the file looked for.
    assert "no token was found" in msg and f"{env_dir}/absent" in msg, msg
    assert bao.token not in run.output
    msg = run.task("outside the policy")["msg"]
    assert "HTTP 403" in msg and "kv1/app/db" in msg, msg


def test_sealed_server_is_a_clear_error(tmp_path, run_playbook):
    with running_openbao(tmp_path) as server:
        server.seal()
        run = run_playbook(play("""
- name: sealed
  ansible.builtin.debug:
    msg: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', retries=0) }}"
"""), env=env_for(server))
    msg = run.task("sealed")["msg"]
    assert "Vault is sealed" in msg and "unseal" in msg, msg


def test_info_module_in_check_mode(bao, run_playbook):
    before = bao.api("GET", "secret/metadata/openshift/pull-secret")[1]["data"]
    run = run_playbook(play("""
- name: latest
  proxshift.hashi_vault.hashicorp_vault_info:
    path: openshift/pull-secret
  register: latest
  no_log: true
- name: v1 of it
  proxshift.hashi_vault.hashicorp_vault_info:
    path: openshift/pull-secret
    version: 1
- name: kv1
  proxshift.hashi_vault.hashicorp_vault_info:
    engine_mount_point: kv1
    path: app/db
- name: absent
  proxshift.hashi_vault.hashicorp_vault_info:
    path: openshift/absent
- name: check the registered latest
  ansible.builtin.assert:
    that:
      - latest.data.pullSecret == expected
      - latest.version == 2
      - latest is not changed
"""), env=env_for(bao), check=True, extra_vars={"expected": PULL_SECRET_CANARY})
    assert run.rc == 0, run.output
    v1 = run.task("v1 of it")
    assert (v1["found"], v1["version"], v1["data"]["pullSecret"], v1["changed"]) == (True, 1, "old-value", False)
    assert v1["metadata"]["version"] == 1
    kv1 = run.task("kv1")
    assert (kv1["kv_version"], kv1["data"], kv1["version"]) == (1, {"user": "app", "password": "kv1-pw"}, None)
    absent = run.task("absent")
    assert (absent["found"], absent["data"]) == (False, None) and "no secret at secret/openshift/absent" in absent["msg"]
    assert bao.api("GET", "secret/metadata/openshift/pull-secret")[1]["data"] == before, "nothing was written"


def test_ansible_doc_renders_the_lookup(tmp_path):
    proc = subprocess.run([tool("ansible-doc"), "-t", "lookup", "proxshift.hashi_vault.kv"],
                          env=ansible_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "VAULT_ADDR" in proc.stdout and "engine_mount_point" in proc.stdout
    assert "[WARNING]" not in proc.stderr, proc.stderr


def test_ansible_resolves_the_lookups_options_and_the_binary_reads_no_environment(bao, run_playbook):
    """Ansible's config system resolves every option from the lookup's DOCUMENTATION (an empty variable counting
    as unset, as AWX renders an empty credential field: ANSIBLE_HASHI_VAULT_ADDR="" gives way to VAULT_ADDR) and
    sends final values; the backend binary, run alone with the same environment, takes nothing from it."""
    env = {"ANSIBLE_HASHI_VAULT_ADDR": "", "VAULT_ADDR": bao.addr, "ANSIBLE_HASHI_VAULT_TOKEN": "",
           "VAULT_TOKEN": bao.token, "ANSIBLE_HASHI_VAULT_TIMEOUT": "7", "VAULT_SKIP_VERIFY": "false"}
    run = run_playbook(play("""
- name: everything from the environment
  ansible.builtin.set_fact:
    value: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', key='pullSecret') }}"
  no_log: true
- name: check
  ansible.builtin.assert:
    that: value == expected
"""), env=env, extra_vars={"expected": PULL_SECRET_CANARY})
    assert run.status("check") == "ok", [(r["task"], r.get("msg")) for r in run.results]
    proc = subprocess.run([str(collection_binary("hashi_vault")), "--lookup"],
                          input=json.dumps({"terms": ["openshift/pull-secret"]}), env={"PATH": "/usr/bin:/bin", **env},
                          capture_output=True, text=True, timeout=60)
    result = json.loads(proc.stdout)
    assert result["failed"] and "missing required arguments: url" in result["msg"], result
    assert bao.token not in proc.stdout + proc.stderr
