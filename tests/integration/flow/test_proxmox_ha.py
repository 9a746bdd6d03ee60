"""Opt-in Proxmox HA (`proxmox_ha: true`) end to end on the compact cluster: site.yaml makes its three masters HA
resources kept apart by a negative resource-affinity rule; a Proxmox node then fails (pvesim's `node_offline`): the HA
manager fences it after a delay and recovers what it can, but never puts two masters on one node — the master of the
lost node waits in `recovery` while every other node holds one — and when the node is back the master runs there
again. deprovision.yaml removes the rule and the HA resources before it deletes the VMs.

On Proxmox VE 8 (no rules) each master gets an HA group preferring its own node: with three masters on three nodes
the lost node's master runs beside another until its node is back, then moves home (the groups fail back)."""
from __future__ import annotations

import time

import pytest

CLUSTER = "lab-compact"


def ha_services(sim) -> dict[int, tuple[str, str]]:
    """vmid -> (node, state) of every HA service, as /cluster/ha/status/current reports it (every call is also a
    round of the simulated HA manager)."""
    status = sim.root_api("GET", "/cluster/ha/status/current")
    return {int(e["sid"].split(":")[1]): (e["node"], e["state"]) for e in status if e["type"] == "service"}


def wait_for(sim, predicate, what: str, rounds: int = 120):
    """The services once `predicate` holds, within `rounds` rounds of the simulated HA manager (half a second apart:
    the fence delay is scaled simulated time, so a healthy run needs a few)."""
    for _ in range(rounds):
        services = ha_services(sim)
        if predicate(services):
            return services
        time.sleep(0.5)
    raise AssertionError(f"{what} after {rounds} HA manager rounds: {ha_services(sim)}")


def masters_apart(services, vmids) -> bool:
    started = [services[v][0] for v in vmids if services[v][1] == "started"]
    return len(started) == len(set(started))


def test_a_lost_node_keeps_the_control_plane_apart_and_it_comes_back(run_flow, site):
    site.sim.root_password = "demo-root-password"  # the demo seed's root@pam (simulator only)
    # The HA configuration needs Sys.Console on / (proxmox_access.yaml -e proxmox_access_ha=true).
    site.sim.root_api("PUT", "/access/roles/ProxShiftProvisioner", {"privs": "Sys.Console", "append": "1"})
    run = run_flow("site.yaml", CLUSTER, extra={"proxmox_ha": True})
    assert run.rc == 0, run.output
    vms = {vm["vmid"]: vm for vm in site.owned_vms(CLUSTER)}
    assert len(vms) == 3, vms
    rules = site.sim.root_api("GET", "/cluster/ha/rules")
    assert [(r["rule"], r["affinity"], r["comment"]) for r in rules] == [
        (f"proxshift-{CLUSTER}-control-plane", "negative", f"proxshift:{CLUSTER}")], rules
    assert {int(s.split(":")[1]) for s in rules[0]["resources"].split(",")} == set(vms)
    services = ha_services(site.sim)
    assert set(services) == set(vms) and all(state == "started" for _, state in services.values()), services

    again = run_flow("site.yaml", CLUSTER, extra={"proxmox_ha": True}, tags="start")
    assert again.rc == 0, again.output
    assert "Proxmox HA for the cluster's VMs" not in again.changed_tasks(), again.changed_tasks()

    victim = min(vms)
    lost = services[victim][0]
    site.sim.fault({"node_offline": {"node": lost}})
    assert ha_services(site.sim)[victim][1] == "fence", "the HA manager fences before it recovers"
    # Fenced, then recovered where the rule allows, or left waiting when no node may take it.
    after = wait_for(site.sim, lambda s: s[victim][1] != "fence", "the lost node's master was never recovered")
    assert masters_apart(after, vms), after
    if after[victim][1] == "recovery":
        assert after[victim][0] == lost, after
    else:
        assert after[victim][1] == "started" and after[victim][0] != lost, after

    site.sim.fault({"node_offline": {"node": lost, "offline": False}})
    back = wait_for(site.sim, lambda s: all(state == "started" for _, state in s.values()), "the master did not come back")
    assert masters_apart(back, vms), back

    gone = run_flow("deprovision.yaml", CLUSTER, extra={"proxmox_ha": True})
    assert gone.rc == 0, gone.output
    assert site.owned_vms(CLUSTER) == []
    assert site.sim.root_api("GET", "/cluster/ha/rules") == []
    assert site.sim.root_api("GET", "/cluster/ha/resources") == []


def ha_groups(sim) -> dict[str, dict]:
    return {g["group"]: g for g in sim.root_api("GET", "/cluster/ha/groups")}


@pytest.mark.parametrize("site", [["--pve-version", "8.4.1"]], indirect=True, ids=["pve8"])
def test_pve8_groups_bring_the_lost_nodes_master_home(run_flow, site):
    site.sim.root_password = "demo-root-password"  # the demo seed's root@pam (simulator only)
    site.sim.root_api("PUT", "/access/roles/ProxShiftProvisioner", {"privs": "Sys.Console", "append": "1"})
    run = run_flow("site.yaml", CLUSTER, extra={"proxmox_ha": True})
    assert run.rc == 0, run.output
    assert "with no spare node, a lost node's control-plane VM runs beside another" in run.output, run.output
    vms = {vm["vmid"]: vm for vm in site.owned_vms(CLUSTER)}
    services = ha_services(site.sim)
    homes = {vmid: node for vmid, (node, _) in services.items()}
    assert set(homes) == set(vms) and masters_apart(services, vms), services
    groups = ha_groups(site.sim)
    assert {name: (g["nodes"], g["comment"]) for name, g in groups.items()} == {
        f"proxshift-{CLUSTER}-{vmid}": (f"{node}:2", f"proxshift:{CLUSTER}") for vmid, node in homes.items()}, groups
    bound = {r["sid"]: r.get("group") for r in site.sim.root_api("GET", "/cluster/ha/resources")}
    assert bound == {f"vm:{vmid}": f"proxshift-{CLUSTER}-{vmid}" for vmid in vms}, bound

    again = run_flow("site.yaml", CLUSTER, extra={"proxmox_ha": True}, tags="start")
    assert again.rc == 0, again.output
    assert "Proxmox HA for the cluster's VMs" not in again.changed_tasks(), again.changed_tasks()

    # Twice the same node: each time its master runs elsewhere while it is down and comes home after.
    victim = min(vms)
    lost = homes[victim]
    for _ in range(2):
        site.sim.fault({"node_offline": {"node": lost}})
        away = wait_for(site.sim, lambda s: s[victim][1] == "started" and s[victim][0] != lost,
                        "the lost node's master was never restarted elsewhere")
        assert all(state == "started" for _, state in away.values()), away
        site.sim.fault({"node_offline": {"node": lost, "offline": False}})
        back = wait_for(site.sim, lambda s: s[victim][0] == lost, "the master did not move home")
        assert masters_apart(back, vms), back

    gone = run_flow("deprovision.yaml", CLUSTER, extra={"proxmox_ha": True})
    assert gone.rc == 0, gone.output
    assert site.owned_vms(CLUSTER) == []
    assert ha_groups(site.sim) == {}
    assert site.sim.root_api("GET", "/cluster/ha/resources") == []
