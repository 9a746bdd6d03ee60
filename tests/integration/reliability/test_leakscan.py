"""The secret-leak scan itself (tests/leakscan.py): it must catch a canary in any scanned text, including
the auth inside a JSON pull secret, and must accept censored no_log output."""
from __future__ import annotations

import base64
import json
import re
import urllib.parse
from pathlib import Path

import leakscan
from testlib import ADMIN_CLIENT_KEY_CANARY, KUBEADMIN_PASSWORD_CANARY, REPO

PULL = json.dumps({"auths": {"registry.example.com": {"auth": "bGVha3NjYW46c2VjcmV0LTAwMDE="}}})


SPECIAL = 'pw"canary/\u00e4&x y=1'


class FakeModule:
    CANARY_PULL = PULL
    SPECIAL_CANARY = SPECIAL
    KEY_CANARY = ADMIN_CLIENT_KEY_CANARY
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


def test_a_canary_is_found_in_every_encoding_it_can_leak_in():
    """#43: raw, JSON-escaped (Python's \\u, escaped twice), URL-encoded (form and quote, either hex case), base64
    at each alignment and alphabet, and a PEM key's lines (from its base64 form, split or escaped)."""
    pem = base64.b64decode(ADMIN_CLIENT_KEY_CANARY).decode()
    body_line = pem.splitlines()[1]
    leaks = {
        "JSON-escaped": json.dumps({"error": "bad", "echo": {"password": SPECIAL}}),
        "JSON-escaped twice": json.dumps({"msg": json.dumps({"password": SPECIAL}, ensure_ascii=False)}),
        "URL-encoded form": "POST body: " + urllib.parse.urlencode({"user": "a", "password": SPECIAL}),
        "URL-encoded lower": "GET /x?p=" + urllib.parse.quote(SPECIAL, safe="").lower(),
        "PEM line in JSON": json.dumps({"key": pem}),
        "PEM line alone": f"... {body_line[:40]}\n{body_line[40:]} ... {body_line}",
        "base64 key": f"client-key-data: {ADMIN_CLIENT_KEY_CANARY}",
    }
    for prefix in ("", "a", "ab"):
        plain = f"{prefix}admin:{SPECIAL}:end".encode()
        leaks[f"base64 +{len(prefix)}"] = "Authorization: Basic " + base64.b64encode(plain).decode()
        leaks[f"urlsafe base64 +{len(prefix)}"] = "data=" + base64.urlsafe_b64encode(plain).decode()
    for name, text in leaks.items():
        s = scanner()
        s.scan(text, "ansible-playbook stdout", test="t")
        assert s.findings, f"{name} not found: {text}"
        assert {f.canary for f in s.findings} <= {SPECIAL, ADMIN_CLIENT_KEY_CANARY}, (name, s.findings)


def test_the_admin_kubeconfig_client_key_is_a_canary():
    double = (REPO / "tests" / "fixtures" / "bin" / "openshift-install").read_text()
    assert f"client-key-data: {ADMIN_CLIENT_KEY_CANARY}" in double
    assert ADMIN_CLIENT_KEY_CANARY in leakscan.SCAN.canaries


def test_retries_loop_items_and_async_polls_are_recorded_and_scanned(run_playbook, tmp_path):
    """#43: AWX stores each retry, loop item and async poll; so does the recording callback, and the scan
    reads them (a control: the value is shown on purpose here, and the scan of a copy finds it)."""
    marker = "retry-item-poll-marker-0042"
    run = run_playbook(f"""
    - hosts: localhost
      gather_facts: false
      tasks:
        - ansible.builtin.command: echo {marker}
          register: r
          until: r.attempts | default(0) > 1
          retries: 2
          delay: 0
        - ansible.builtin.debug:
            msg: "{{{{ item }}}}"
          loop: ["{marker}"]
        - ansible.builtin.command: echo {marker}
          async: 30
          poll: 1
    """)
    assert run.rc == 0, run.output
    events = [json.loads(line) for line in sorted(tmp_path.glob("record-*.events.jsonl"))[0].read_text().splitlines()]
    assert {"retry", "item_ok"} <= {e["status"] for e in events}, events
    s = leakscan.LeakScan()
    s.register(marker, "test marker")
    for path in tmp_path.glob("record-*.events.jsonl"):
        s.scan(path.read_text(), "recorded events", test="t")
    assert s.findings


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


def test_async_job_files_are_read_and_the_installers_own_log_is_not(tmp_path):
    assert leakscan.is_artifact(tmp_path / "ansible-async" / "j123456789.4242")
    assert leakscan.is_artifact(tmp_path / "record-1.jsonl")
    assert not leakscan.is_artifact(tmp_path / "agent" / ".openshift_install.log")
    assert not leakscan.is_artifact(tmp_path / "agent" / "auth" / "kubeconfig")


def test_the_installer_doubles_kubeadmin_password_is_a_canary():
    double = (REPO / "tests" / "fixtures" / "bin" / "openshift-install").read_text()
    assert re.search(r"PROXSHIFT_TEST_KUBEADMIN_PASSWORD:-" + re.escape(KUBEADMIN_PASSWORD_CANARY) + r"\}", double)
    assert KUBEADMIN_PASSWORD_CANARY in leakscan.SCAN.canaries


def installer_state(dir_: Path) -> None:
    """What `agent create image` leaves for `agent wait-for`: the state file and auth/ (the password)."""
    (dir_ / "auth").mkdir(parents=True)
    (dir_ / ".openshift_install_state.json").write_text("{}")
    (dir_ / "auth" / "kubeadmin-password").write_text(KUBEADMIN_PASSWORD_CANARY)
    (dir_ / "auth" / "kubeconfig").write_text("clusters:\n- cluster:\n    server: https://api.leak.example.com:6443\n")


WAIT_PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.import_role:
        name: proxshift.openshift.install_wait
      vars:
        install_wait_dir: "{dir}"
        install_wait_openshift_install: "{installer}"
        install_wait_poll: 1
"""


def test_install_wait_shows_progress_without_the_kubeadmin_password(run_playbook, tmp_path):
    """The installer double prints the password line at install-complete, as the real one does; every
    output AWX would store (results, -vvv display, async job files) stays without it, and the summary
    shows the redacted line. The installer sees no credential of the run's environment."""
    agent = tmp_path / "agent"
    installer_state(agent)
    play = WAIT_PLAY.format(dir=agent, installer=REPO / "tests" / "fixtures" / "bin" / "openshift-install")
    env_seen = tmp_path / "env-seen"
    run = run_playbook(play, verbosity=3, env={
        "VAULT_TOKEN": "hvs.wait-canary-vault", "PROXMOX_TOKEN_SECRET": "pve-wait-canary-secret",
        "PROXSHIFT_TEST_ON_INSTALLED": f"env > {env_seen}"})
    assert run.rc == 0, run.output
    log = (agent / ".openshift_install.log").read_text()
    assert f'and password: \\"{KUBEADMIN_PASSWORD_CANARY}\\"' in log, log
    summaries = [r["result"]["install_wait_summary"] for r in run.results if "install_wait_summary" in r["result"]]
    assert [s["stage"] for s in summaries] == ["bootstrap-complete", "install-complete"], summaries
    assert any("password <redacted>" in line for line in summaries[1]["last_lines"]), summaries[1]
    assert "Install complete!" in " ".join(summaries[1]["last_lines"])
    seen = env_seen.read_text()
    assert "wait-canary" not in seen and "PATH=" in seen, seen
    jobs = list((tmp_path / "ansible-async").rglob("*")) if (tmp_path / "ansible-async").exists() else []
    assert not any(KUBEADMIN_PASSWORD_CANARY in p.read_text() for p in jobs if p.is_file())


def test_a_failed_install_wait_says_why_without_secrets(run_playbook, tmp_path):
    agent = tmp_path / "agent"
    installer_state(agent)
    play = WAIT_PLAY.format(dir=agent, installer=REPO / "tests" / "fixtures" / "bin" / "openshift-install")
    run = run_playbook(play, env={"PROXSHIFT_TEST_INSTALL_FAIL": "install-complete"})
    assert run.rc != 0
    assert "install-complete did not succeed (exit 1)" in run.output, run.output
    assert "OAuthServerRouteEndpointAccessibleController_SyncError" in run.output, run.output
