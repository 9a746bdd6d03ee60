"""proxshift.hashi_vault.hashicorp_vault through real ansible-playbook against a real OpenBao server."""
from __future__ import annotations

import pytest

CANARY = {
    "canary_kubeadmin": "canary-kubeadmin-7b1e",
    "canary_kubeconfig": "canary-kubeconfig-93dc",
    "canary_rotated": "canary-rotated-41aa",
}

HEADER = """
- hosts: localhost
  gather_facts: false
  module_defaults:
    group/proxshift.hashi_vault.vault:
      url: "{{ vault_addr }}"
      token: "{{ vault_token }}"
      retries: 0
  tasks:
"""

WRITE = """
    - name: {name}
      proxshift.hashi_vault.hashicorp_vault:
        path: openshift/c1
        merge: {merge}
        data:
          api: https://api.c1.example.com:6443
          kubeadmin: "{{{{ {kubeadmin} }}}}"
          kubeconfig: "{{{{ canary_kubeconfig }}}}"
      register: {register}
"""

READ = """
    - name: Read back
      proxshift.hashi_vault.hashicorp_vault:
        state: read
        secrets:
          - {name: kubeadmin, path: openshift/c1, key: kubeadmin}
          - {name: whole, path: openshift/c1}
          - {name: first, path: openshift/c1, key: kubeadmin, version: 1}
          - {name: missing, path: openshift/none, default: none-here}
      register: vault_read
      no_log: true

    - name: Check what was read
      ansible.builtin.assert:
        that:
          - vault_read.secrets.kubeadmin == canary_rotated
          - vault_read.secrets.first == canary_kubeadmin
          - vault_read.secrets.whole.kubeconfig == canary_kubeconfig
          - vault_read.secrets.whole.api == 'https://api.c1.example.com:6443'
          - vault_read.secrets.missing == 'none-here'
          - vault_read.secrets_info.kubeadmin.version == 2
          - not vault_read.changed
        quiet: true
      no_log: true
"""


def vars_for(openbao, **more):
    return {"vault_addr": openbao.addr, "vault_token": openbao.token, **CANARY, **more}


def assert_no_canary(run, record_too=True):
    text = run.output
    if record_too:
        import json

        text += json.dumps(run.results)
    for value in CANARY.values():
        assert value not in text, f"{value} leaked into the playbook output"


def test_write_idempotent_rotate_read_and_nothing_leaks_at_vvv(run_playbook, openbao):
    playbook = (
        HEADER
        + WRITE.format(name="Store credentials", merge="false", kubeadmin="canary_kubeadmin", register="w1")
        + WRITE.format(name="Store them again", merge="false", kubeadmin="canary_kubeadmin", register="w2")
        + WRITE.format(name="Rotate kubeadmin", merge="true", kubeadmin="canary_rotated", register="w3")
        + READ
    )
    run = run_playbook(playbook, extra_vars=vars_for(openbao), verbosity=3, diff=True)
    assert run.rc == 0, run.output
    first, again, rotate = (run.task(n) for n in ("Store credentials", "Store them again", "Rotate kubeadmin"))
    assert (first["changed"], first["version"]) == (True, 1)
    assert first["changes"]["added"] == ["api", "kubeadmin", "kubeconfig"]
    assert (again["changed"], again["version"]) == (False, 1)
    assert (rotate["changed"], rotate["version"], rotate["changes"]["changed"]) == (True, 2, ["kubeadmin"])
    assert run.status("Check what was read") == "ok"
    # The diff is shown at --diff, naming the key but no value.
    assert "(changed)" in run.output
    assert openbao.kv_get("openshift/c1")["kubeadmin"] == CANARY["canary_rotated"]
    assert_no_canary(run)


def test_check_mode_predicts_and_writes_nothing(run_playbook, openbao):
    openbao.kv_put("openshift/c1", {"api": "https://api.c1.example.com:6443", "kubeadmin": CANARY["canary_kubeadmin"],
                                    "kubeconfig": CANARY["canary_kubeconfig"]})
    playbook = HEADER + WRITE.format(name="Rotate", merge="true", kubeadmin="canary_rotated", register="w") + WRITE.format(
        name="Unchanged", merge="true", kubeadmin="canary_kubeadmin", register="u")
    run = run_playbook(playbook, extra_vars=vars_for(openbao), check=True, diff=True, verbosity=3)
    assert run.rc == 0, run.output
    assert run.task("Rotate")["changed"] is True
    assert run.task("Unchanged")["changed"] is False
    assert run.task("Rotate")["diff"]["after"]["kubeadmin"] == "<masked> (changed)"
    assert openbao.kv_get("openshift/c1")["kubeadmin"] == CANARY["canary_kubeadmin"], "check mode wrote"
    assert_no_canary(run)


def test_absent_and_destroy(run_playbook, openbao):
    openbao.kv_put("tmp/x", {"k": CANARY["canary_kubeadmin"]})
    playbook = HEADER + """
    - name: Soft delete
      proxshift.hashi_vault.hashicorp_vault: {path: tmp/x, state: absent}
    - name: Soft delete again
      proxshift.hashi_vault.hashicorp_vault: {path: tmp/x, state: absent}
    - name: Destroy
      proxshift.hashi_vault.hashicorp_vault: {path: tmp/x, state: absent, destroy: true}
    - name: Destroy again
      proxshift.hashi_vault.hashicorp_vault: {path: tmp/x, state: absent, destroy: true}
"""
    run = run_playbook(playbook, extra_vars=vars_for(openbao), verbosity=3)
    assert run.rc == 0, run.output
    assert [run.task(n)["changed"] for n in ("Soft delete", "Soft delete again", "Destroy", "Destroy again")] == [
        True, False, True, False]
    assert openbao.api("GET", "secret/metadata/tmp/x")[0] == 404
    assert_no_canary(run)


def test_failures_are_clear_and_masked(run_playbook, openbao):
    token = openbao.token_with_policy("ro", 'path "secret/data/*" { capabilities = ["read"] }')
    playbook = HEADER + WRITE.format(name="Write without permission", merge="false", kubeadmin="canary_kubeadmin",
                                     register="w")
    run = run_playbook(playbook, extra_vars=vars_for(openbao, vault_token=token), verbosity=3)
    assert run.rc != 0
    msg = run.task("Write without permission")["msg"]
    assert msg.startswith("writing secret/openshift/c1: POST secret/data/openshift/c1: Vault answered HTTP 403"), msg
    assert token not in run.output
    assert_no_canary(run)

    missing = HEADER + """
    - name: Read a missing key
      proxshift.hashi_vault.hashicorp_vault:
        state: read
        secrets: [{name: x, path: nothing/here}]
"""
    run = run_playbook(missing, extra_vars=vars_for(openbao))
    assert run.rc != 0
    assert run.task("Read a missing key")["msg"] == (
        "secrets[x]: no secret at secret/nothing/here (set default to allow this)")


def test_connection_from_the_environment(run_playbook, openbao):
    openbao.kv_put("env/x", {"k": "from-env"})
    playbook = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Read with VAULT_ADDR and VAULT_TOKEN
      proxshift.hashi_vault.hashicorp_vault:
        state: read
        token_validate: true
        secrets: [{name: k, path: env/x, key: k}]
      register: r
    - name: Check
      ansible.builtin.assert:
        that: r.secrets.k == 'from-env'
"""
    run = run_playbook(playbook, env={"VAULT_ADDR": openbao.addr, "VAULT_TOKEN": openbao.token})
    assert run.rc == 0, run.output
    assert run.task("Read with VAULT_ADDR and VAULT_TOKEN")["secrets"] == {"k": "from-env"}


@pytest.mark.canary_shown  # the leak scan's control: this output shows the canary on purpose
def test_only_the_read_result_shows_values_which_is_why_docs_say_no_log(run_playbook, openbao):
    """The control for the leak checks above: without no_log a read task's values do reach the output
    (the one documented exception), so the checks would catch a real leak."""
    openbao.kv_put("openshift/c1", {"kubeadmin": CANARY["canary_kubeadmin"]})
    playbook = HEADER + """
    - name: Read without no_log
      proxshift.hashi_vault.hashicorp_vault:
        state: read
        secrets: [{name: k, path: openshift/c1, key: kubeadmin}]
"""
    run = run_playbook(playbook, extra_vars=vars_for(openbao), verbosity=3)
    assert run.rc == 0, run.output
    assert CANARY["canary_kubeadmin"] in run.output
    assert openbao.token not in run.output


STORE_TASK = "proxshift.hashi_vault.credentials : Store api, kubeconfig and kubeadmin password"


def test_collection_roles_store_and_read_credentials(run_playbook, openbao, tmp_path):
    """The collection's credentials and secrets roles, on the module, with connection options set
    once through the action group."""
    auth = tmp_path / "auth"
    auth.mkdir()
    (auth / "kubeconfig").write_text(CANARY["canary_kubeconfig"] + "\n")
    (auth / "kubeadmin-password").write_text(CANARY["canary_kubeadmin"] + "\n")
    playbook = HEADER + """
    - name: Store the installer credentials
      ansible.builtin.include_role:
        name: proxshift.hashi_vault.credentials
      vars:
        credentials_path: openshift/clusters/c1
        credentials_auth_dir: "{{ auth_dir }}"
        credentials_api_url: https://api.c1.example.com:6443
    - name: Read them back
      ansible.builtin.include_role:
        name: proxshift.hashi_vault.secrets
      vars:
        secrets_items:
          - {name: kubeadmin, path: openshift/clusters/c1, key: kubeadmin}
          - {name: api, path: openshift/clusters/c1, key: api}
    - name: Check
      ansible.builtin.assert:
        that:
          - secrets_values.kubeadmin == canary_kubeadmin
          - secrets_values.api == 'https://api.c1.example.com:6443'
        quiet: true
      no_log: true
"""
    run = run_playbook(playbook, extra_vars=vars_for(openbao, auth_dir=str(auth)), verbosity=3)
    assert run.rc == 0, run.output
    stored = openbao.kv_get("openshift/clusters/c1")
    assert stored == {"api": "https://api.c1.example.com:6443", "kubeadmin": CANARY["canary_kubeadmin"],
                      "kubeconfig": CANARY["canary_kubeconfig"], "phase": "installed"}
    assert run.task(STORE_TASK)["changed"] is True
    assert_no_canary(run)
    # A second run stores nothing.
    again = run_playbook(playbook, extra_vars=vars_for(openbao, auth_dir=str(auth)))
    assert again.rc == 0, again.output
    assert again.task(STORE_TASK)["changed"] is False
