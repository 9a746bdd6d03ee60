"""The secret-leak scan itself (tests/leakscan.py): it must catch a canary in any scanned text, including
the auth inside a JSON pull secret, and must accept censored no_log output."""
from __future__ import annotations

import json

import leakscan

PULL = json.dumps({"auths": {"registry.example.com": {"auth": "bGVha3NjYW46c2VjcmV0LTAwMDE="}}})


class FakeModule:
    CANARY_PULL = PULL
    TOKEN = "tok-canary-0f0f-aaaa"
    PLAIN = "not a secret at all"


def scanner() -> leakscan.LeakScan:
    s = leakscan.LeakScan()
    s.discover(FakeModule)
    return s


def test_discovery_registers_named_and_valued_canaries_and_json_leaves():
    s = scanner()
    assert PULL in s.canaries and "tok-canary-0f0f-aaaa" in s.canaries
    assert "bGVha3NjYW46c2VjcmV0LTAwMDE=" in s.canaries  # the part that would really leak
    assert "not a secret at all" not in s.canaries


def test_a_leak_is_found_with_its_origin_and_place():
    s = scanner()
    s.scan('ok: [localhost] => {"auth": "bGVha3NjYW46c2VjcmV0LTAwMDE="}', "ansible-playbook stdout", test="t")
    assert [(f.origin, f.where, f.test) for f in s.findings] == [("FakeModule.CANARY_PULL (inside)", "ansible-playbook stdout", "t")]


def test_censored_no_log_output_passes():
    s = scanner()
    s.scan("ok: [localhost] => {\"censored\": \"the output has been hidden due to the fact that 'no_log: true' "
           "was specified for this result\", \"changed\": false}", "ansible-playbook stdout", test="t")
    assert s.findings == []


def test_a_no_log_task_returning_a_secret_by_design_is_censored_in_every_output(run_playbook, tmp_path, canary):
    """The module returns the canary on purpose (echo of a no_log option); with no_log on the task the
    displayed and recorded results are censored, so the session scan (which sees this run) stays clean."""
    secret = canary("probe-canary-by-design-5a5a")
    play = f"""
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Secret by design
      proxshift_test.probe.protocol_probe: {{path: "{tmp_path / 'f'}", content: x, secret: "{secret}"}}
      register: r
      no_log: true
    - name: Use it
      ansible.builtin.assert: {{that: [r.secret_echo | length > 0], quiet: true}}
"""
    run = run_playbook(play, verbosity=3)
    assert run.rc == 0, run.output
    assert secret not in run.output and secret not in json.dumps(run.results)
    assert "no_log: true" in run.output
