"""pvesim for the vm_lifecycle tests: the shared starter (`services.running_pvesim`, HTTPS with its own
CA) with a seed per test, plus the power-specific views of its admin API (power POSTs, tasks, fault
injection, running state).

Kept in its own module so it does not collide with the proxmox_vm area's `conftest.py`; the fixture is
imported by `test_vm_lifecycle.py`.
"""
from __future__ import annotations

import contextlib
import re

import pytest
import yaml

from services import ROOT_TOKEN_ID, ROOT_TOKEN_SECRET, PveSim, running_pvesim

TOKEN_ID = ROOT_TOKEN_ID
# The lab seed's test-only token; the tests assert it never shows up in any output.
TOKEN_SECRET = ROOT_TOKEN_SECRET


class Sim:
    """One running simulator (HTTPS with its own CA), with what the lifecycle tests ask of it."""

    def __init__(self, sim: PveSim):
        self.sim = sim
        self.url = sim.url

    def requests(self) -> list[dict]:
        return self.sim.requests()

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
        status, body = self.sim.admin("DELETE", "requests")
        assert status == 200, body

    def tasks(self) -> list[dict]:
        status, body = self.sim.admin("GET", "tasks")
        assert status == 200, body
        return body

    def inject(self, *faults: dict):
        for f in faults:
            self.sim.fault(f)

    def vm_running(self, vmid: int) -> bool:
        return next(v for v in self.sim.state()["vms"] if v["vmid"] == vmid)["running"]

    def module_args(self, **extra) -> dict:
        """Connection options for the module plus `extra`."""
        return {
            "api_host": self.url,
            "api_token_id": TOKEN_ID,
            "api_token_secret": TOKEN_SECRET,
            "ca_path": str(self.sim.ca_path),
            **extra,
        }


@pytest.fixture
def lifecycle_sim(tmp_path):
    """Factory: `lifecycle_sim(seed_dict, time_scale=0.1, agent_delay=20)` → a running [`Sim`] (the
    shared `services.running_pvesim` with this test's own seed)."""
    count = {"n": 0}
    with contextlib.ExitStack() as stack:

        def start(seed: dict, *, time_scale: float = 0.1, agent_delay: float = 20.0) -> Sim:
            seed = dict(seed)
            seed.setdefault("users", []).append({"userid": "root@pam"})
            seed.setdefault("tokens", []).append(
                {"userid": "root@pam", "tokenid": TOKEN_ID.split("!")[1], "secret": TOKEN_SECRET,
                 "privsep": False}
            )
            count["n"] += 1
            d = tmp_path / f"sim-{count['n']}"
            d.mkdir()
            seed_file = d / "seed.yaml"
            seed_file.write_text(yaml.safe_dump(seed))
            sim = stack.enter_context(
                running_pvesim(d, seed_file, str(time_scale), ["--agent-delay", str(agent_delay)])
            )
            return Sim(sim)

        yield start


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
