"""Fixtures for the OpenShift-side playbook tests: a real etcd 3.6 + kube-apiserver 1.34 +
kube-controller-manager (built from Go modules by `scripts/deps/kube.sh`) with the fixture CRDs loaded, the
real External Secrets controller, a fake OpenShift OAuth endpoint, and a small API helper.

The cluster is live: kube-controller-manager signs approved CSRs, marks a node whose kubelet stopped
`Ready=Unknown` with the `unreachable` taints, collects garbage and finalises namespaces. Every Node has a
running kubelet (its Lease is renewed by the test environment) until `KubeApi.stop_kubelet` stops it.

The API server is started by the same Rust harness the cargo tests use (`kube_client::testenv`, through
`cargo run --example testenv`), found by the envtest convention: KUBEBUILDER_ASSETS, defaulting to the
cache that `scripts/deps/kube.sh` fills. Missing binaries FAIL the tests with instructions.

Import the fixtures into a test module with `from kube_fixtures import kube_api, fake_oauth, KubeApi`
(`spoke_api`: a second API server, for a cluster imported into the hub `kube_api`). An imported fixture is
that module's own definition, so each module gets its own control plane: they are module-scoped, so each is
stopped when its module ends (session-scoped, every module's stayed up, idle but busy, to the end of the run).
(Named distinctly so they cannot clash with another conftest in this folder.)
"""
from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import pytest
import yaml

import leakscan
from testlib import REPO, stop_process

T = TypeVar("T")

OAUTH_PASSWORD = "Canary-Pass-98765-zyxwv"
# kube_client::testenv::CONTROLLER_MANAGER_USER
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
# stop_kubelet/start_kubelet read and rewrite one file: stand-ins call them from several threads at once (nodes
# booting side by side), so each change is made whole under this lock.
_KUBELETS_LOCK = threading.Lock()


def wait_until(check: Callable[[], T], timeout: float, why: Callable[[], str], interval: float = 0.2) -> T:
    """`check()`'s first truthy answer, looked for every `interval` s; none in `timeout` s fails the test with
    `why()` (the state that was seen). The one poll of the kube fixtures and tests: a bound on waiting for a
    live controller, never a speed target."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() >= deadline:
            pytest.fail(why())
        time.sleep(interval)


class KubeApi:
    """Coordinates of the running API server plus a tiny client (admin token unless told otherwise)."""

    def __init__(self, info: dict):
        self.info = info
        self.url = info["url"]
        self.ca_cert = info["ca_cert"]
        self.wrong_ca_cert = info["wrong_ca_cert"]
        self.admin_token = info["admin_token"]
        # The admin kubeconfig's token (the double copies a kubeconfig holding it into auth/): a canary.
        leakscan.SCAN.register(self.admin_token, f"admin token of the test API server {self.url}")
        self.viewer_token = info["viewer_token"]
        self.kubeconfig_token = info["kubeconfig_token"]
        self.admin_cert_kubeconfig = info["admin_cert_kubeconfig"]
        self._ctx = ssl.create_default_context(cafile=self.ca_cert)

    def request(self, method: str, path: str, body=None, *, token: str | None = None,
                content_type: str = "application/json", headers: list[tuple[str, str]] | None = None):
        """Returns (status, parsed JSON or text). `headers`: more (name, value) pairs, a name may repeat
        (`Impersonate-Group`). A 429 with `retryAfterSeconds` (the apiserver's "storage is (re)initializing"
        while a new CRD's watch cache fills, or priority and fairness) is tried again after that long, up
        to 10 times, as client-go's request does (`rest.Request.request` with `checkWait`)."""
        for _ in range(10):
            status, out = self._request_once(method, path, body, token=token, content_type=content_type,
                                             headers=headers)
            if status != 429 or not isinstance(out, dict):
                return status, out
            time.sleep(min(int(out.get("details", {}).get("retryAfterSeconds", 1) or 1), 5))
        return status, out

    def _request_once(self, method: str, path: str, body=None, *, token: str | None = None,
                      content_type: str = "application/json", headers: list[tuple[str, str]] | None = None):
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

    def audit_events(self, controllers: bool = False) -> list[dict]:
        """The API server's audit log so far (one event per request: user.username, verb, requestURI,
        responseStatus.code), as `kube_client::testenv` writes it. kube-controller-manager's own requests
        (it patches node taints and conditions, finalises namespaces, …) only with `controllers=True`: the
        tests ask what the modules and the test did."""
        path = Path(self.info["dir"]) / "audit.log"
        if not path.exists():
            return []
        events = []
        for line in path.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line being written
            if controllers or e.get("user", {}).get("username") != CONTROLLER_MANAGER_USER:
                events.append(e)
        return events

    def stop_kubelet(self, node: str) -> None:
        """The node's kubelet dies: its Lease is no longer renewed, so kube-controller-manager's
        node-lifecycle controller marks the node `Ready=Unknown` and taints it `unreachable` after
        `node_monitor_grace_seconds`."""
        with _KUBELETS_LOCK, open(Path(self.info["dir"]) / "stopped-kubelets", "a") as f:
            f.write(node + "\n")

    def start_kubelet(self, node: str) -> None:
        """A kubelet named `node` runs again: a new machine joined with the name of one whose kubelet died (a
        replaced worker). Its Lease is renewed again, so the node-lifecycle controller leaves it alone."""
        path = Path(self.info["dir"]) / "stopped-kubelets"
        with _KUBELETS_LOCK:
            if not path.exists():
                return
            kept = [n for n in path.read_text().split() if n != node]
            tmp = path.with_suffix(".tmp")
            tmp.write_text("".join(n + "\n" for n in kept))
            tmp.replace(path)  # the harness reads the file whole or the old one, never half of it

    def install_crds(self, folder: Path) -> None:
        """Create the CRDs of every `*.yaml` in `folder` (kept when they exist) and wait until each is
        Established and served."""
        names = []
        for path in sorted(folder.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc:
                    continue
                names.append(doc["metadata"]["name"])
                status, out = self.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
                assert status in (201, 409), f"installing {path.name}: HTTP {status}: {out}"
        for name in names:
            self.crd_established(name)

    def crd_established(self, name: str) -> None:
        """Wait (60 s at most) until the CRD `name` is Established."""
        def crd() -> dict:
            return self.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}") or {}
        wait_until(lambda: any(c["type"] == "Established" and c["status"] == "True"
                               for c in (crd().get("status") or {}).get("conditions") or []),
                   60, lambda: f"CRD {name} not Established in 60 s: {crd().get('status')}")

    def install_crd(self, doc: dict) -> None:
        """Create one CRD (kept when it exists) and wait until it is Established."""
        status, out = self.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
        assert status in (201, 409), f"installing CRD {doc['metadata']['name']}: HTTP {status}: {out}"
        self.crd_established(doc["metadata"]["name"])

    def kubeconfig(self, token: str) -> str:
        ca = base64.b64encode(Path(self.ca_cert).read_bytes()).decode()
        return json.dumps({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "t", "cluster": {"server": self.url, "certificate-authority-data": ca}}],
            "users": [{"name": "t", "user": {"token": token}}],
            "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
            "current-context": "t",
        }, indent=1)


def kube_assets() -> Path:
    """The folder with the control plane and controller binaries (the envtest convention)."""
    return Path(os.environ.get("KUBEBUILDER_ASSETS") or "/var/cache/proxshift/kube-current/bin")


ESO_CRDS = REPO / "tests" / "fixtures" / "crds" / "external-secrets"


def crd_names(folder: Path) -> list[str]:
    """The names of the CRDs of every `*.yaml` in `folder`."""
    return [doc["metadata"]["name"] for path in sorted(folder.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


@contextmanager
def external_secrets_controller(api: KubeApi, workdir: Path) -> Iterator[Path]:
    """The real External Secrets controller (github.com/external-secrets/external-secrets, built by
    `scripts/deps/kube.sh`) running against `api`, as its Deployment runs it on a cluster but without the
    webhook and the cert controller (the CRDs need no conversion webhook). Its CRDs come with the operator
    (`FakeOlm` creates them from the bundle), so it starts once all of them are Established, as the operand
    runs only after the operator is installed: until then the log file is empty. Yields its log file. It
    talks to the API with the admin token, and to Vault as each store says."""
    binary = kube_assets() / "external-secrets"
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: run scripts/deps/kube.sh (builds the External Secrets controller "
                    "from Go modules) or set KUBEBUILDER_ASSETS")
    names = crd_names(ESO_CRDS)
    kubeconfig = workdir / "eso.kubeconfig"
    kubeconfig.write_text(api.kubeconfig(api.admin_token))
    log = workdir / "external-secrets.log"
    log.write_text("")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(workdir), "KUBECONFIG": str(kubeconfig)}
    # Stores re-validated every 2 s instead of 5 min, so a test sees a store's condition change quickly.
    cmd = [str(binary), "--metrics-addr=0", "--enable-leader-election=false", "--loglevel=debug",
           "--zap-time-encoding=iso8601", "--store-requeue-interval=2s"]
    procs: list[subprocess.Popen] = []
    stop = threading.Event()

    def established(name: str) -> bool:
        crd = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}") or {}
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    def start_when_served():
        while not stop.wait(0.5):
            if all(established(n) for n in names):
                with open(log, "w") as out:
                    procs.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env))
                return

    starter = threading.Thread(target=start_when_served, daemon=True)
    starter.start()
    try:
        yield log
        for proc in procs:
            assert proc.poll() is None, f"the External Secrets controller exited:\n{log.read_text()[-3000:]}"
    finally:
        stop.set()
        starter.join(timeout=30)
        for proc in procs:
            stop_process(proc, timeout=15)


def external_secret(api: KubeApi, ns: str, name: str, store: str, key: str) -> None:
    """An application's ExternalSecret: `password` of Vault `key` (under the store's KV mount) into Secret `name`."""
    if api.get(f"/api/v1/namespaces/{ns}") is None:
        api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    api.ok("POST", f"/apis/external-secrets.io/v1/namespaces/{ns}/externalsecrets", {
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "metadata": {"name": name, "namespace": ns},
        "spec": {"refreshInterval": "10s", "secretStoreRef": {"kind": "ClusterSecretStore", "name": store},
                 "target": {"name": name},
                 "data": [{"secretKey": "password", "remoteRef": {"key": key, "property": "password"}}]}})


def ready_condition(api: KubeApi, path: str, timeout: float = 60) -> dict:
    """The object's Ready condition once the controller has set one."""
    def ready() -> list[dict]:
        return [c for c in ((api.get(path) or {}).get("status") or {}).get("conditions", []) if c["type"] == "Ready"]
    return wait_until(ready, timeout, lambda: f"no Ready condition on {path} in {timeout} s: {(api.get(path) or {}).get('status')}",
                      interval=0.5)[0]


def event_message(api: KubeApi, ns: str, name: str, needle: str, timeout: float = 60) -> str:
    """The message of the first Event about object `name` in `ns` that contains `needle`, once one is there."""
    def about() -> list[str]:
        events = (api.get(f"/api/v1/namespaces/{ns}/events") or {}).get("items", [])
        return [e["message"] for e in events if e["involvedObject"]["name"] == name]
    return wait_until(lambda: [m for m in about() if needle in m], timeout,
                      lambda: f"no Event about {ns}/{name} saying {needle!r} in {timeout} s: {about()}", interval=0.5)[0]


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


@pytest.fixture(scope="module")
def kube_api(tmp_path_factory):
    """The ACM hub (and, for tests that need no second cluster, the cluster too)."""
    yield from _running_testenv(tmp_path_factory, "kube")


@pytest.fixture(scope="module")
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
