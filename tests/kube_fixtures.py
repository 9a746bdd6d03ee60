"""Fixtures for the cluster_auth / acm_import playbook tests: a real etcd + kube-apiserver v1.20.2 (+
kube-controller-manager) with the fixture CRDs loaded, a fake OpenShift OAuth endpoint, and a small
API helper that plays the hub's controllers.

The API server is started by the same Rust harness the cargo tests use (`kube_client::testenv`, through
`cargo run --example testenv`), found by the envtest convention: KUBEBUILDER_ASSETS, defaulting to the
cache that `scripts/deps/kube.sh` fills. Missing binaries FAIL the tests with instructions.

Import the fixtures into a test module with `from kube_fixtures import kube_api, fake_oauth, KubeApi`
(`spoke_api`: a second API server, for a cluster imported into the hub `kube_api`).
(Named distinctly so they cannot clash with another conftest in this folder.)
"""
from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from testlib import REPO

OAUTH_PASSWORD = "Canary-Pass-98765-zyxwv"


class KubeApi:
    """Coordinates of the running API server plus a tiny client (admin token unless told otherwise)."""

    def __init__(self, info: dict):
        self.info = info
        self.url = info["url"]
        self.ca_cert = info["ca_cert"]
        self.wrong_ca_cert = info["wrong_ca_cert"]
        self.admin_token = info["admin_token"]
        self.viewer_token = info["viewer_token"]
        self.kubeconfig_token = info["kubeconfig_token"]
        self.admin_cert_kubeconfig = info["admin_cert_kubeconfig"]
        self._ctx = ssl.create_default_context(cafile=self.ca_cert)

    def request(self, method: str, path: str, body=None, *, token: str | None = None,
                content_type: str = "application/json", headers: list[tuple[str, str]] | None = None):
        """Returns (status, parsed JSON or text). `headers`: more (name, value) pairs, a name may repeat
        (`Impersonate-Group`)."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token or self.admin_token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        if headers:
            # urllib keeps one value per header name; the API server reads repeated
            # Impersonate-Group headers, so those go through http.client directly.
            return self._raw(method, path, data, req, headers)
        try:
            with urllib.request.urlopen(req, context=self._ctx, timeout=30) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode()

    def _raw(self, method, path, data, req, headers):
        import http.client
        from urllib.parse import urlparse
        u = urlparse(self.url)
        conn = http.client.HTTPSConnection(u.hostname, u.port, context=self._ctx, timeout=30)
        conn.putrequest(method, path)
        for k, v in list(req.header_items()) + list(headers):
            conn.putheader(k, v)
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        resp = conn.getresponse()
        status, raw = resp.status, resp.read()
        conn.close()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode()

    def audit_events(self) -> list[dict]:
        """The API server's audit log so far (one event per request; see kube_client::testenv)."""
        lines = (Path(self.info["dir"]) / "audit.log").read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def ok(self, method: str, path: str, body=None, **kw):
        status, out = self.request(method, path, body, **kw)
        assert 200 <= status < 300, f"{method} {path}: HTTP {status}: {out}"
        return out

    def get(self, path: str):
        """The object, or None on 404."""
        status, out = self.request("GET", path)
        if status == 404:
            return None
        assert status == 200, f"GET {path}: HTTP {status}: {out}"
        return out

    def patch_status(self, path: str, status: dict):
        return self.ok("PATCH", path + "/status", {"status": status}, content_type="application/merge-patch+json")

    def audit_events(self) -> list[dict]:
        """The API server's audit log so far (one event per request: user.username, verb, requestURI,
        responseStatus.code), as `kube_client::testenv` writes it."""
        path = Path(self.info["dir"]) / "audit.log"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def kubeconfig(self, token: str) -> str:
        ca = base64.b64encode(Path(self.ca_cert).read_bytes()).decode()
        return json.dumps({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "t", "cluster": {"server": self.url, "certificate-authority-data": ca}}],
            "users": [{"name": "t", "user": {"token": token}}],
            "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
            "current-context": "t",
        }, indent=1)


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def condition(t: str, s: str, msg: str = "set by the test") -> dict:
    return {"type": t, "status": s, "reason": "Test", "message": msg, "lastTransitionTime": "2026-01-01T00:00:00Z"}


def _running_testenv(tmp_path_factory, name: str):
    log = tmp_path_factory.mktemp(name) / "testenv.log"
    cmd = ["cargo", "run", "-q", "-p", "kube-client", "--features", "testenv", "--example", "testenv"]
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
    line = proc.stdout.readline()
    if not line.strip():
        proc.wait(timeout=30)
        pytest.fail("could not start the test kube-apiserver (`scripts/deps/kube.sh` builds it and "
                    f"KUBEBUILDER_ASSETS locates it):\n{log.read_text()[-3000:]}")
    yield KubeApi(json.loads(line))
    proc.stdin.close()  # the harness exits; its watchdog stops the servers by PID
    proc.wait(timeout=60)


@pytest.fixture(scope="session")
def kube_api(tmp_path_factory):
    """The ACM hub (and, for tests that need no second cluster, the cluster too)."""
    yield from _running_testenv(tmp_path_factory, "kube")


@pytest.fixture(scope="session")
def spoke_api(tmp_path_factory):
    """A second, separate API server: the cluster imported into the hub `kube_api` (importing the hub
    into itself is refused)."""
    yield from _running_testenv(tmp_path_factory, "spoke")


@pytest.fixture
def fake_oauth(kube_api):
    """The fake OpenShift OAuth endpoint with user kubeadmin / OAUTH_PASSWORD; yields its URL."""
    script = REPO / "tests" / "fixtures" / "fake_openshift_oauth.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), "--cert", kube_api.info["server_cert"], "--key", kube_api.info["server_key"],
         "--user", f"kubeadmin:{OAUTH_PASSWORD}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    assert line.startswith("PORT "), f"fake OAuth server said {line!r}"
    yield f"https://127.0.0.1:{line.split()[1]}"
    proc.terminate()
    proc.wait(timeout=10)


_counter = iter(range(1_000_000))


def unique(prefix: str) -> str:
    return f"{prefix}-py{os.getpid() % 1000}-{next(_counter)}"
