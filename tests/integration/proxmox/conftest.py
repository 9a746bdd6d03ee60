"""Fixtures for the Proxmox module tests: the `pvesim` binary (the project's Proxmox VE simulator) started
over HTTPS with its own CA on a free loopback port, seeded with the 3-node lab seed, and stopped by its PID
afterwards. Its admin API (`/_pvesim/...`) gives the request log (check mode must show no write) and fault
injection.

The binary is found through PVESIM_BIN, the repo's release/debug target dirs, or CARGO_TARGET_DIR. When it
is missing the tests FAIL with instructions; a skipped simulator test would look like a passing one.
"""
from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testlib import REPO, free_port

SEED = REPO / "modules" / "pvesim" / "examples" / "lab.yaml"
# Tokens of the lab seed (test-only values, never real credentials).
ROOT_TOKEN_ID = "root@pam!pvesim"
ROOT_TOKEN_SECRET = "5e1e0c5a-7d2b-4c4e-9a51-000000000001"
ROOT_PASSWORD = "pvesim-root-password"


def pvesim_bin() -> Path:
    env = os.environ.get("PVESIM_BIN")
    if env:
        if not Path(env).is_file():
            pytest.fail(f"PVESIM_BIN={env} does not exist")
        return Path(env)
    targets = [REPO / "target"]
    if os.environ.get("CARGO_TARGET_DIR"):
        targets.insert(0, Path(os.environ["CARGO_TARGET_DIR"]))
    candidates = [
        t / sub / "pvesim"
        for t in targets
        for sub in ("x86_64-unknown-linux-gnu/release", "release", "debug")
    ]
    for c in candidates:
        if c.is_file():
            return c
    pytest.fail(
        "pvesim binary not found: run `make build` (or `cargo build --release -p pvesim`) or set PVESIM_BIN. "
        f"Looked in: {', '.join(map(str, candidates))}"
    )


@dataclass
class PveSim:
    url: str
    host: str
    port: int
    ca_path: Path
    proc: subprocess.Popen
    log: Path
    _ctx: ssl.SSLContext = field(repr=False, default=None)
    token_secret: str = ROOT_TOKEN_SECRET
    root_password: str = ROOT_PASSWORD

    def _call(self, method: str, url: str, body=None, headers=None, form=None):
        data = None
        hdrs = dict(headers or {})
        if body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            hdrs["Content-Type"] = "application/x-www-form-urlencoded"
        req = urllib.request.Request(url, method=method, data=data, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=30, context=self._ctx) as resp:
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw else {})
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, (json.loads(raw) if raw else {})

    def admin(self, method: str, path: str, body=None):
        return self._call(method, f"{self.url}/_pvesim/{path.lstrip('/')}", body=body)

    def api(self, method: str, path: str, form: dict | None = None):
        """A real API call as root@pam's token (for setup the module does not do, e.g. starting a VM)."""
        status, body = self._call(
            method,
            f"{self.url}/api2/json/{path.lstrip('/')}",
            headers={"Authorization": f"PVEAPIToken={ROOT_TOKEN_ID}={ROOT_TOKEN_SECRET}"},
            form=form,
        )
        assert status == 200, f"{method} {path}: {status} {body}"
        return body.get("data")

    def requests(self, since: int = 0) -> list[dict]:
        status, body = self.admin("GET", f"requests?since={since}")
        assert status == 200, body
        return body

    def last_seq(self) -> int:
        reqs = self.requests()
        return reqs[-1]["seq"] if reqs else 0

    def writes_since(self, seq: int) -> list[str]:
        return [f"{r['method']} {r['path']}" for r in self.requests(seq) if r["method"] != "GET"]

    def fault(self, fault: dict):
        status, body = self.admin("POST", "faults", fault)
        assert status == 200, body

    def vm(self, vmid: int) -> dict | None:
        """The VM's config (from the simulator's state), or None."""
        status, state = self.admin("GET", "state")
        assert status == 200
        for vm in state.get("vms", []):
            if vm["vmid"] == vmid:
                return {k: str(v) for k, v in vm["config"].items()}
        return None

    def vm_by_name(self, name: str) -> tuple[int, str, dict] | None:
        status, state = self.admin("GET", "state")
        for vm in state.get("vms", []):
            if vm["config"].get("name") == name:
                return vm["vmid"], vm["node"], {k: str(v) for k, v in vm["config"].items()}
        return None

    def play(self, tasks: str, *, connection: str = "token") -> str:
        """A playbook on localhost with the connection options set once via the action group."""
        if connection == "token":
            conn = f"""
              api_host: "{self.host}"
              api_port: {self.port}
              api_token_id: "{ROOT_TOKEN_ID}"
              api_token_secret: "{ROOT_TOKEN_SECRET}"
              ca_path: "{self.ca_path}"
            """
        else:
            conn = f"""
              api_host: "{self.host}"
              api_port: {self.port}
              api_user: root@pam
              api_password: "{ROOT_PASSWORD}"
              ca_path: "{self.ca_path}"
            """
        head = textwrap.dedent(
            """
            - hosts: localhost
              gather_facts: false
              module_defaults:
                group/proxshift.proxmox.proxmox:
            """
        )
        conn_block = textwrap.indent(textwrap.dedent(conn).strip("\n"), " " * 6)
        body = textwrap.indent(textwrap.dedent(tasks).strip("\n"), " " * 4)
        return head + conn_block + "\n  tasks:\n" + body + "\n"


@pytest.fixture
def pvesim(tmp_path):
    binary = pvesim_bin()
    port = free_port()
    ca = tmp_path / "pvesim-ca.pem"
    log = tmp_path / "pvesim.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                str(binary),
                "--listen", f"127.0.0.1:{port}",
                "--tls", "--ca-out", str(ca),
                "--seed", str(SEED),
                "--time-scale", "0.02",
                "--auth-delay-ms", "0",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"pvesim exited early:\n{log.read_text()}")
            if ca.exists() and re.search(r"listening on", log.read_text()):
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"pvesim did not start:\n{log.read_text()}")
        ctx = ssl.create_default_context(cafile=str(ca))
        sim = PveSim(url=f"https://127.0.0.1:{port}", host="127.0.0.1", port=port, ca_path=ca, proc=proc,
                     log=log, _ctx=ctx)
        status, _ = sim.admin("GET", "health")
        assert status == 200
        yield sim
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
