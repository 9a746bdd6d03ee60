"""A pvesim process for the vm_lifecycle tests: a seeded cluster on an ephemeral port, its request log,
task list and fault injection through the simulator's admin API (`/_pvesim/...`).

Kept in its own module so it does not collide with the proxmox_vm helper's `conftest.py`; the
fixture is imported by `test_vm_lifecycle.py`.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from testlib import REPO

TOKEN_ID = "root@pam!lifecycle"
# A canary, never a real secret: the tests assert it never shows up in any output.
TOKEN_SECRET = "0a1b2c3d-cafe-4bad-9ead-canary000001"


def pvesim_binary() -> Path:
    """The simulator binary: $PVESIM_BIN, else the newest build in the usual target dirs."""
    if os.environ.get("PVESIM_BIN"):
        return Path(os.environ["PVESIM_BIN"])
    roots = [Path(os.environ["CARGO_TARGET_DIR"])] if os.environ.get("CARGO_TARGET_DIR") else []
    roots.append(REPO / "target")
    found = [
        p
        for root in roots
        for sub in ("release", "debug", "x86_64-unknown-linux-gnu/release")
        for p in [root / sub / "pvesim"]
        if p.exists()
    ]
    if not found:
        pytest.fail("pvesim binary not found: build it (`cargo build -p pvesim`) or set PVESIM_BIN")
    return max(found, key=lambda p: p.stat().st_mtime)


class Sim:
    """One running simulator."""

    def __init__(self, proc: subprocess.Popen, url: str):
        self.proc = proc
        self.url = url

    def _admin(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.url}/_pvesim{path}", data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def requests(self) -> list[dict]:
        return self._admin("GET", "/requests")

    def writes(self) -> list[dict]:
        """Every recorded request that is not a GET (what check mode must never send)."""
        return [r for r in self.requests() if r["method"] != "GET"]

    def power_posts(self) -> list[tuple[int, str]]:
        """(vmid, action) of every `POST .../status/<action>`, in order."""
        out = []
        for r in self.requests():
            m = re.fullmatch(r"/nodes/[^/]+/qemu/(\d+)/status/(\w+)", r["path"])
            if r["method"] == "POST" and m:
                out.append((int(m.group(1)), m.group(2)))
        return out

    def clear_requests(self):
        self._admin("DELETE", "/requests")

    def tasks(self) -> list[dict]:
        return self._admin("GET", "/tasks")

    def inject(self, *faults: dict):
        self._admin("POST", "/faults", list(faults))

    def state(self) -> dict:
        return self._admin("GET", "/state")

    def vm_running(self, vmid: int) -> bool:
        return next(v for v in self.state()["vms"] if v["vmid"] == vmid)["running"]

    def module_args(self, **extra) -> dict:
        """Connection options for the module plus `extra`."""
        return {
            "api_host": self.url,
            "api_token_id": TOKEN_ID,
            "api_token_secret": TOKEN_SECRET,
            **extra,
        }


@pytest.fixture
def lifecycle_sim(tmp_path):
    """Factory: `lifecycle_sim(seed_dict, time_scale=0.1, agent_delay=20)` → a running [`Sim`]."""
    started: list[subprocess.Popen] = []

    def start(seed: dict, *, time_scale: float = 0.1, agent_delay: float = 20.0) -> Sim:
        seed = dict(seed)
        seed.setdefault("tokens", []).append(
            {"userid": "root@pam", "tokenid": "lifecycle", "secret": TOKEN_SECRET, "privsep": False}
        )
        seed_file = tmp_path / f"seed-{len(started)}.yaml"
        seed_file.write_text(yaml.safe_dump(seed))
        proc = subprocess.Popen(
            [
                str(pvesim_binary()),
                "--listen", "127.0.0.1:0",
                "--seed", str(seed_file),
                "--time-scale", str(time_scale),
                "--agent-delay", str(agent_delay),
                "--auth-delay-ms", "0",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started.append(proc)
        line = proc.stdout.readline()
        m = re.search(r"listening on (https?://[^/\s]+)", line)
        if not m:
            proc.kill()
            pytest.fail(f"pvesim did not start: {line}{proc.stdout.read()}")
        return Sim(proc, m.group(1))

    yield start
    for p in started:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def vm(vmid: int, name: str, node: str = "pve1", *, tags=("ocp1", "proxshift"), running=False,
       memory=4096, agent=True, ips=None, **extra) -> dict:
    """One VM seed entry."""
    config = {
        "name": name,
        "memory": str(memory),
        "cores": 2,
        "tags": ";".join(tags),
        "net0": f"virtio=BC:24:11:00:{vmid // 256 % 256:02X}:{vmid % 256:02X},bridge=vmbr0",
    }
    if agent:
        config["agent"] = "1"
    seed = {"vmid": vmid, "node": node, "config": config, "running": running, **extra}
    if ips is not None:
        seed["agent_ips"] = {"net0": ips}
    return seed


def nodes(*names: str, maxmem: str = "64G") -> list[dict]:
    return [{"name": n, "maxmem": maxmem} for n in names]
