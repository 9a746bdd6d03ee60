"""install_wait's inputs (#43): numbers given as text (`-e install_wait_poll=1`) work, a wrong one fails naming
the option instead of a censored no_log failure, and a stop file ends the wait at its next look with the file's
text as the reason (how a run that lost the cluster's lease stops waiting)."""
from __future__ import annotations

import threading
import time

from test_leakscan import WAIT_PLAY, installer_state
from testlib import REPO

INSTALLER = REPO / "tests" / "fixtures" / "bin" / "openshift-install"


def test_numbers_given_as_text_work_and_a_wrong_one_is_named(run_playbook, tmp_path):
    agent = tmp_path / "agent"
    installer_state(agent)
    play = WAIT_PLAY.format(dir=agent, installer=INSTALLER).replace("        install_wait_poll: 1\n", "")
    run = run_playbook(play, args=["-e", "install_wait_poll=1", "-e", "install_wait_summary_lines=5"])
    assert run.rc == 0, run.output
    assert "censored" not in run.output
    # Not a number: the role's argument spec names it; a number that is not a wait (0): the role's check.
    for bad in ("1.5", "0"):
        run = run_playbook(play, args=["-e", f"install_wait_poll={bad}"])
        assert run.rc != 0 and "install_wait_poll" in run.output and "censored" not in run.output, run.output
    assert 'install_wait_poll must be a whole number of seconds (or lines) above 0, not "0"' in run.output


def test_a_stop_file_ends_the_wait_with_its_reason(run_playbook, tmp_path):
    agent = tmp_path / "agent"
    installer_state(agent)
    waiting, go, stop = tmp_path / "waiting", tmp_path / "go", tmp_path / "lease.lost"
    hold = f"touch {waiting}; for i in $(seq 3000); do [ -f {go} ] && break; sleep 0.1; done"
    play = WAIT_PLAY.format(dir=agent, installer=INSTALLER) + f'        install_wait_stop_file: "{stop}"\n'
    runs = {}
    thread = threading.Thread(target=lambda: runs.setdefault("r", run_playbook(
        play, env={"PROXSHIFT_TEST_ON_WAIT": hold})))
    thread.start()
    try:
        for _ in range(3000):  # bounded: the installer reaches its wait
            if waiting.exists():
                break
            time.sleep(0.1)
        stop.write_text("this run no longer holds the lease secret/x/lease: it is held by run other")
        thread.join(timeout=300)
        assert not thread.is_alive(), "the wait did not end at its next look"
    finally:
        go.touch()
        thread.join()
    run = runs["r"]
    assert run.rc != 0
    assert ("bootstrap-complete did not succeed (stopped: this run no longer holds the lease secret/x/lease: "
            "it is held by run other)") in " ".join(run.output.split()), run.output
