"""Fault matrix, Vault side (a real OpenBao): sealed server, a policy that forbids the write, a
check-and-set conflict, a refused connection, an invalid token. Each fails clearly and writes nothing;
after the fault clears the rerun writes the secret exactly once (one new version, no lost update) and a
second pass changes nothing. The secret is a canary: it never shows up in any output.
"""
from __future__ import annotations

import json
import re

import pytest

from testlib import free_port

PATH = "openshift/rel"
SECRET = {"kubeadmin": "canary-reliability-kubeadmin-7e21", "api": "https://api.rel.example.com:6443"}
READ_ONLY = 'path "secret/data/*" { capabilities = ["read"] }\npath "secret/metadata/*" { capabilities = ["read"] }'


def play(*tasks: dict) -> str:
    return json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": list(tasks)}])


def write(name: str, bao, **over) -> dict:
    args = {"url": bao.addr, "token": bao.token, "retries": 0, "timeout": 5, "path": PATH, "data": SECRET, **over}
    return {"name": name, "proxshift.hashi_vault.hashicorp_vault": args, "ignore_errors": True}


def versions(bao) -> int:
    status, body = bao.api("GET", f"secret/metadata/{PATH}")
    return body["data"]["current_version"] if status == 200 else 0


# id, setup(bao) → task overrides for the faulty run, expected message patterns, clear(bao), versions
# already there before the rerun.
CASES = {
    "vault-sealed": (lambda b: (b.seal(), {})[1], [r"(?i)sealed"], lambda b: b.unseal(), 0),
    "vault-policy-403": (lambda b: {"token": b.token_with_policy("ro", READ_ONLY)},
                         [r"403", r"(?i)permission denied"], None, 0),
    "vault-cas-conflict": (lambda b: (b.kv_put(PATH, {"kubeadmin": "someone-else"}), {"cas": 0})[1],
                           [r"(?i)check-and-set|cas"], None, 1),
    "vault-connection-refused": (lambda b: {"url": f"http://127.0.0.1:{free_port()}"},
                                 [r"(?i)connect"], None, 0),
    "vault-invalid-token": (lambda b: {"token": "s.invalid-reliability-token"},
                            [r"403|401", r"(?i)permission denied|invalid token"], None, 0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_vault_fault_is_clear_and_the_rerun_writes_once(case, bao, run_playbook):
    setup, expect, clear, before = CASES[case]
    over = setup(bao)
    run = run_playbook(play(write("Write", bao, **over)), verbosity=2)
    assert run.status("Write") == "failed", run.output
    msg = run.task("Write")["msg"]
    for rx in expect:
        assert re.search(rx, msg), f"{rx!r} not in {msg!r}"
    for value in (SECRET["kubeadmin"], bao.token):
        assert value not in run.output, f"{case}: a secret leaked"
    if clear:
        clear(bao)
    assert versions(bao) == before, "the failed write changed the secret"
    if case == "vault-cas-conflict":
        over = {"cas": 1}  # the operator reads the current version and writes on top of it
    else:
        over = {}
    run = run_playbook(play(write("Rerun", bao, **over), write("Again", bao, **over)))
    assert run.status("Rerun") == "ok" and run.status("Again") == "ok", run.output
    assert run.task("Rerun")["changed"] is True and run.task("Again")["changed"] is False
    assert bao.kv_get(PATH) == SECRET
    assert versions(bao) == before + 1, "a lost or duplicated write"
    assert SECRET["kubeadmin"] not in run.output
