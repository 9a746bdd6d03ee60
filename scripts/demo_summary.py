"""Print the demo's summary table: each VM the simulator holds, its node, state, MAC and the node IP the
manifests gave it. Reads pvesim's admin API (state) and the rendered agent-config."""
from __future__ import annotations

import json
import ssl
import sys
import urllib.request
from pathlib import Path

import yaml


def main(base_url: str, cluster_dir: str) -> int:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the admin API of our own simulator, on loopback
    with urllib.request.urlopen(f"{base_url}/_pvesim/state", context=ctx, timeout=10) as resp:
        text = resp.read().decode()
    try:
        state = json.loads(text)
    except json.JSONDecodeError:
        state = yaml.safe_load(text)

    ips = {}
    agent_config = Path(cluster_dir) / "agent-config.yaml"
    if agent_config.exists():
        for host in (yaml.safe_load(agent_config.read_text()) or {}).get("hosts", []):
            iface = (host.get("networkConfig") or {}).get("interfaces", [{}])[0]
            addrs = ((iface.get("ipv4") or {}).get("address") or [{}])
            ips[host.get("hostname")] = (addrs[0].get("ip", ""), host.get("role", ""))

    rows = []
    for vm in state.get("vms", []):
        cfg = vm.get("config", {})
        net0 = cfg.get("net0", "")
        mac = next((p.split("=", 1)[1] for p in net0.split(",") if "=" in p and p.split("=", 1)[1].count(":") == 5), "")
        name = cfg.get("name", "")
        ip, role = ips.get(name, ("", ""))
        tags = cfg.get("tags", "")
        rows.append((str(vm.get("vmid")), name, role, vm.get("node", ""), "running" if vm.get("running") else "stopped",
                     mac, ip, tags))
    header = ("VMID", "NAME", "ROLE", "NODE", "STATE", "MAC", "IP", "TAGS")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for row in [header] + sorted(rows):
        print("  ".join(col.ljust(w) for col, w in zip(row, widths)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
