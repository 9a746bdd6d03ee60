"""playbooks/proxmox_access.yaml against pvesim's permission model: it creates the least-privilege role,
user, ACLs and privilege-separated token as root, stores the token in Vault, and the whole flow
(site.yaml on the demo inventory) then runs with that token alone; what the role does not grant is refused.
"""
from __future__ import annotations

import base64
import json

import pytest
import yaml

from services import DEMO_SEED, running_openbao, running_pvesim
from testlib import REPO

ROOT_PASSWORD = "demo-root-password"  # the demo seed's root@pam password (simulator only)
FLOW_TAGS = "preflight,secrets,manifests,vms,start"
# Canary install secrets (a well-formed pull secret and SSH key, valid nowhere).
CANARY_PULL_SECRET = json.dumps({"auths": {"registry.example.com": {"auth": "Y2FuYXJ5OmFjY2Vzcy03MzE5"}}})
SSH_KEY = "ssh-ed25519 " + base64.b64encode(b"\0\0\0\x0bssh-ed25519\0\0\0\x20" + bytes(range(32, 64))).decode() + " access@test"


@pytest.fixture
def bare(tmp_path):
    """pvesim with the demo layout but only root@pam (no ProxShift user, role or token yet), and OpenBao."""
    seed = yaml.safe_load(DEMO_SEED.read_text())
    seed["users"] = [u for u in seed["users"] if u["userid"] == "root@pam"]
    for key in ("tokens", "roles", "acl"):
        seed.pop(key, None)
    path = tmp_path / "bare-seed.yaml"
    path.write_text(yaml.safe_dump(seed))
    (tmp_path / "sim").mkdir()
    (tmp_path / "bao").mkdir()
    with running_pvesim(tmp_path / "sim", seed=path) as sim, running_openbao(tmp_path / "bao") as bao:
        bao.kv_put("openshift/pull-secret", {"pullSecret": CANARY_PULL_SECRET})
        bao.kv_put("openshift/ssh", {"publicKey": SSH_KEY})
        yield sim, bao


def base_vars(sim, bao, tmp_path) -> dict:
    return {
        "proxmox_api_port": sim.port,
        "proxmox_ca_path": str(sim.ca_path),
        "vault_url": bao.addr,
        "proxshift_work_dir": str(tmp_path / "work"),
    }


def test_least_privilege_token_runs_the_flow_and_nothing_else(bare, run_playbook, tmp_path):
    sim, bao = bare
    inventory = REPO / "demo" / "inventory"
    def set_up_access():
        return run_playbook(
            REPO / "playbooks" / "proxmox_access.yaml",
            inventory=inventory,
            extra_vars=base_vars(sim, bao, tmp_path),
            env={"PROXMOX_ADMIN_PASSWORD": ROOT_PASSWORD, "VAULT_TOKEN": bao.token},
        )

    access = set_up_access()
    assert access.rc == 0, access.output
    stored = bao.kv_get("proxmox/api-token")
    assert stored and stored["token_id"] == "proxshift@pve!ansible", stored
    secret = stored["secret"]
    assert secret not in access.output and ROOT_PASSWORD not in access.output

    state = sim.state()
    token = next(t for t in state["tokens"] if t["userid"] == "proxshift@pve")
    assert token["privsep"] is True
    acl = {(a.get("user") or a.get("token"), a["role"]) for a in state["acl"]}
    assert ("proxshift@pve", "ProxShiftProvisioner") in acl
    assert ("proxshift@pve!ansible", "ProxShiftProvisioner") in acl
    # Deleting the agent ISO (deprovision) needs Datastore.Allocate: on the ISO storage only, never on /.
    iso_acl = {(a["path"], a.get("user") or a.get("token")) for a in state["acl"] if a["role"] == "ProxShiftIsoStorage"}
    assert iso_acl == {("/storage/local", "proxshift@pve"), ("/storage/local", "proxshift@pve!ansible")}, iso_acl
    iso_role = next(r for r in state["roles"] if r["roleid"] == "ProxShiftIsoStorage")
    assert sorted(iso_role["privs"]) == ["Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.AllocateTemplate",
                                         "Datastore.Audit"], iso_role

    # Rerun: nothing changes, Vault is not rewritten.
    again = set_up_access()
    assert again.rc == 0, again.output
    assert again.changed_tasks() == [], again.changed_tasks()
    assert bao.kv_get("proxmox/api-token")["secret"] == secret

    # Pools in use: the role gains Pool.Allocate (pool membership needs it), and only then.
    pools = run_playbook(
        REPO / "playbooks" / "proxmox_access.yaml",
        inventory=inventory,
        extra_vars={**base_vars(sim, bao, tmp_path), "proxmox_access_pools": ["ocp"]},
        env={"PROXMOX_ADMIN_PASSWORD": ROOT_PASSWORD, "VAULT_TOKEN": bao.token},
    )
    assert pools.rc == 0, pools.output
    role = next(r for r in sim.state()["roles"] if r["roleid"] == "ProxShiftProvisioner")
    assert "Pool.Allocate" in role["privs"], role

    # The whole flow with the new token only (the secret as the playbooks get it, from the environment).
    seq = sim.last_seq()
    flow = run_playbook(
        REPO / "playbooks" / "site.yaml",
        inventory=inventory,
        extra_vars={"cluster_name": "demo", **base_vars(sim, bao, tmp_path)},
        env={"PROXMOX_TOKEN_SECRET": secret, "VAULT_TOKEN": bao.token},
        tags=FLOW_TAGS,
    )
    assert flow.rc == 0, flow.output
    assert CANARY_PULL_SECRET not in flow.output and secret not in flow.output
    owned = [vm for vm in sim.state()["vms"] if "proxshift-demo" in str(vm["config"].get("tags", ""))]
    assert len(owned) == 3 and all(vm["running"] for vm in owned), owned
    calls = [r for r in sim.requests(seq) if r.get("user") == "proxshift@pve!ansible"]
    assert any(r["method"] == "POST" for r in calls), "the flow made no write with the token"
    assert [r for r in calls if r["status"] == 403] == [], "the flow needed a privilege the role lacks"

    # Outside the role: managing users is refused, with the reason.
    refused = run_playbook(
        f"""
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: Try to create another user with the least-privilege token
              proxshift.proxmox.proxmox_access:
                api_host: "127.0.0.1"
                api_port: {sim.port}
                api_token_id: proxshift@pve!ansible
                api_token_secret: "{secret}"
                ca_path: "{sim.ca_path}"
                role: Escalate
                privileges: [Sys.Modify]
                user: intruder@pve
        """
    )
    assert refused.rc != 0
    msg = refused.task("Try to create another user with the least-privilege token")["msg"]
    assert "Permission check failed" in msg and "administrator token" in msg, msg
    writes = [r for r in sim.requests(seq)
              if r.get("user") == "proxshift@pve!ansible" and r["method"] != "GET" and r["path"].startswith("/access")]
    assert writes and all(r["status"] == 403 for r in writes), writes
    assert "Escalate" not in {r["roleid"] for r in sim.state().get("roles", [])}
