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


def test_a_leak_in_a_workers_artifacts_fails_the_parallel_session(tmp_path):
    """Under pytest-xdist (as `make test` runs) a canary that only shows at session end, in a log written
    by a test on a worker, must still fail the whole run: the worker hands it to the controller."""
    import subprocess
    import sys
    import textwrap

    from testlib import REPO

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO / "tests")!r})
        from leakscan import (pytest_collection_finish, pytest_configure, pytest_runtest_logreport,
                              pytest_runtest_protocol, pytest_runtest_teardown, pytest_sessionfinish)
        """))
    (suite / "test_writes_a_log.py").write_text(textwrap.dedent("""
        import leakscan

        SERVICE_CANARY = "svc-canary-in-a-log-7e7e"
        leakscan.SCAN.register(SERVICE_CANARY, "SERVICE_CANARY")  # outside tests/, so not discovered

        def test_service_logs_the_secret(tmp_path):
            (tmp_path / "service.log").write_text("started with token " + SERVICE_CANARY)

        def test_other(tmp_path):
            (tmp_path / "clean.log").write_text("nothing to see")
        """))
    clean = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                            "--basetemp", str(tmp_path / "base-clean"), "-k", "other", str(suite)],
                           capture_output=True, text=True, timeout=300, cwd=str(suite))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    leaky = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                            "--basetemp", str(tmp_path / "base-leaky"), str(suite)],
                           capture_output=True, text=True, timeout=300, cwd=str(suite))
    assert leaky.returncode == 1, leaky.stdout + leaky.stderr
    assert "secret-leak scan" in leaky.stdout and "SERVICE_CANARY" in leaky.stdout
