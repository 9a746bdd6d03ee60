"""Shared fixtures for the Ansible integration tests: run real `ansible-playbook` against the built
module binaries and get back every task result as JSON.

Area-specific fixtures (simulator, OpenBao, kube-apiserver) live in `tests/integration/<area>/conftest.py`;
plain helpers (paths, free ports) are in `tests/testlib.py`.
"""
from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

import leakscan
from testlib import REPO, VENV, PlaybookRun, ansible_env, module_binary, tool

# Longest files first across the xdist workers, and every run's per-file seconds in build/.
pytest_plugins = ["file_durations"]


@pytest.fixture
def ansible_venv() -> Path:
    """The venv whose ansible-core runs the playbooks: the project venv. The protocol suite overrides
    it to run under every supported ansible-core (tests/integration/protocol/conftest.py)."""
    return VENV


@pytest.fixture
def run_playbook(tmp_path, ansible_venv):
    """Run a playbook (YAML text or a path) with real ansible-playbook on localhost (the ansible-core of
    the `ansible_venv` fixture).

    Keyword options: extra_vars (dict), check, diff, verbosity (0-4), env (dict), inventory (text or
    path), tags, args (extra CLI args), timeout (s). Returns a PlaybookRun with rc, stdout, stderr and
    every task result.
    """
    counter = {"n": 0}

    def run(
        playbook: str | Path,
        *,
        extra_vars: dict | None = None,
        check: bool = False,
        diff: bool = False,
        verbosity: int = 0,
        env: dict | None = None,
        inventory: str | Path | None = None,
        tags: str | None = None,
        args: list[str] | None = None,
        timeout: int = 900,
    ) -> PlaybookRun:
        counter["n"] += 1
        n = counter["n"]
        if isinstance(playbook, Path):
            pb_path = playbook
        else:
            pb_path = tmp_path / f"playbook-{n}.yml"
            pb_path.write_text(textwrap.dedent(playbook))
        if inventory is None:
            inv = tmp_path / "inventory.ini"
            inv.write_text(
                f"localhost ansible_connection=local ansible_python_interpreter={ansible_venv / 'bin' / 'python'}\n"
            )
        elif isinstance(inventory, Path):
            inv = inventory
        else:
            inv = tmp_path / f"inventory-{n}.yml"
            inv.write_text(textwrap.dedent(inventory))
        record = tmp_path / f"record-{n}.jsonl"
        events = tmp_path / f"record-{n}.events.jsonl"
        cmd = [tool("ansible-playbook", ansible_venv), "-i", str(inv), str(pb_path)]
        if extra_vars:
            cmd += ["-e", json.dumps(extra_vars)]
        if check:
            cmd.append("--check")
        if diff:
            cmd.append("--diff")
        if verbosity:
            cmd.append("-" + "v" * verbosity)
        if tags:
            cmd += ["--tags", tags]
        cmd += args or []
        proc = subprocess.run(
            cmd,
            env=ansible_env(tmp_path, {"PROXSHIFT_RECORD": str(record), "PROXSHIFT_RECORD_EVENTS": str(events),
                                       **(env or {})}, ansible_venv),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=str(REPO),
        )
        if events.exists():
            leakscan.SCAN.scan(events.read_text(), "recorded events (retries, loop items, async polls)")
        results = []
        if record.exists():
            results = [json.loads(line) for line in record.read_text().splitlines() if line.strip()]
        return PlaybookRun(proc.returncode, proc.stdout, proc.stderr, results)

    return run


@pytest.fixture
def run_inventory(tmp_path):
    """Run `ansible-inventory -i SOURCE --list` (or other args) in the isolated Ansible env; returns the
    CompletedProcess. Its output goes through the secret-leak scan."""
    from leakscan import scan_command

    def run(source: Path, *, args: list[str] | None = None, env: dict | None = None, verbosity: int = 0):
        cmd = [tool("ansible-inventory"), "-i", str(source), *(args or ["--list"])]
        if verbosity:
            cmd.append("-" + "v" * verbosity)
        proc = subprocess.run(cmd, env=ansible_env(tmp_path, env), capture_output=True, text=True, timeout=600,
                              cwd=str(tmp_path))
        scan_command("ansible-inventory", proc.stdout, proc.stderr)
        return proc

    return run


@pytest.fixture
def run_module(tmp_path):
    """Run a module binary directly with an args dict (or raw text); returns (parsed JSON, rc, stdout)."""

    def run(name: str, args: dict | str | None, *, env: dict | None = None):
        binary = module_binary(name)
        cmd = [str(binary)]
        if args is not None:
            args_file = tmp_path / "args"
            args_file.write_text(args if isinstance(args, str) else json.dumps(args))
            cmd.append(str(args_file))
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300)
        try:
            parsed = json.loads(proc.stdout)
        except json.JSONDecodeError as e:
            raise AssertionError(f"{name} printed no single JSON object ({e}):\n{proc.stdout}\n{proc.stderr}")
        return parsed, proc.returncode, proc.stdout

    return run




# ------------------------------------------------------------------------------ secret-leak scan
# Every playbook run's output and results, each test's captured output and the session's logs are
# scanned for the registered canary values (see tests/leakscan.py). `run_playbook` builds its result
# from this module's `PlaybookRun`, so rebinding the name makes every run recorded.
from leakscan import (  # noqa: E402,F401  (pytest hooks and fixtures, registered by import)
    canary,
    pytest_collection_finish,
    pytest_configure,
    pytest_runtest_logreport,
    pytest_runtest_protocol,
    pytest_runtest_teardown,
    pytest_sessionfinish,
    recording,
)

PlaybookRun = recording(PlaybookRun)  # noqa: F811
