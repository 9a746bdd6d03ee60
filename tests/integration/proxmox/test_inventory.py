"""The `proxshift.proxmox.proxmox` inventory plugin with real `ansible-inventory` against pvesim seeded
with 50 VMs of three ProxShift clusters and two LXC containers: default groups, host vars (guest-agent
IPs, config, the guest type), compose, keyed_groups, groups, filters, the inventory cache (the second
run sends no request) and secrets that never show, `-vvv` included; the same source read by
community.proxmox's plugin gives the same default groups and the same `proxmox_*` vars. Also `proxmox_vm_info` in check mode and
`ansible-doc` of the plugin."""
from __future__ import annotations

import json
import subprocess
import textwrap
import time

import pytest

from services import community_proxmox_venv, many_vm_seed, running_pvesim
from testlib import REPO, ansible_env, collection_binary, tool

@pytest.fixture(scope="module")
def sim50(tmp_path_factory):
    d = tmp_path_factory.mktemp("pvesim50")
    with running_pvesim(d, seed=many_vm_seed(d / "seed.yaml", 50, containers=2)) as sim:
        yield sim


@pytest.fixture(scope="module")
def inventory_token(sim50):
    """A fresh root token (random secret, registered as a canary): it must never appear anywhere."""
    from leakscan import SCAN

    data = sim50.api("POST", "access/users/root@pam/token/inventory", form={"privsep": "0"})
    SCAN.register(data["value"], "pvesim inventory token secret")
    return data["full-tokenid"], data["value"]


def unsafe(v):
    """ansible-inventory marks untrusted strings as {"__ansible_unsafe": s}; the plain value."""
    if isinstance(v, dict):
        if set(v) == {"__ansible_unsafe"}:
            return v["__ansible_unsafe"]
        return {k: unsafe(x) for k, x in v.items()}
    if isinstance(v, list):
        return [unsafe(x) for x in v]
    return v


def source(tmp_path, sim, token, extra: str = "", name: str = "proxmox.yml"):
    token_id, secret = token
    path = tmp_path / name
    path.write_text(textwrap.dedent(f"""\
        plugin: proxshift.proxmox.proxmox
        url: {sim.url}
        token_id: "{token_id}"
        token_secret: "{secret}"
        ca_path: {sim.ca_path}
        """) + textwrap.dedent(extra))
    return path


def listed(proc) -> dict:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return unsafe(json.loads(proc.stdout))


def members(inv: dict, group: str) -> set[str]:
    return set(inv.get(group, {}).get("hosts", []))


def test_groups_and_host_vars(sim50, inventory_token, tmp_path, run_inventory):
    proc = run_inventory(source(tmp_path, sim50, inventory_token))
    inv = listed(proc)
    # API text is untrusted: Ansible will never template it (it marks such strings in its output).
    raw = json.loads(proc.stdout)["_meta"]["hostvars"]["vm-000"]
    assert set(raw["proxmox_config"]["net0"]) == {"__ansible_unsafe"}, raw["proxmox_config"]
    hostvars = inv["_meta"]["hostvars"]
    assert set(hostvars) == {f"vm-{i:03d}" for i in range(50)} | {"ct-000", "ct-001"}, "the template is left out"
    assert len(members(inv, "proxmox_all_qemu")) == 50
    assert members(inv, "proxmox_all_running") == {f"vm-{i:03d}" for i in range(0, 50, 2)} | {"ct-000"}
    assert {"vm-001", "ct-001"} <= members(inv, "proxmox_all_stopped")
    assert members(inv, "proxmox_pve2_qemu") == {f"vm-{i:03d}" for i in range(1, 50, 3)}
    # Containers: community.proxmox's type groups, never the qemu ones.
    assert members(inv, "proxmox_all_lxc") == {"ct-000", "ct-001"}
    assert (members(inv, "proxmox_pve1_lxc"), members(inv, "proxmox_pve2_lxc")) == ({"ct-000"}, {"ct-001"})
    assert not {"ct-000", "ct-001"} & members(inv, "proxmox_all_qemu")
    assert members(inv, "proxmox_tag_web") == {"ct-000", "ct-001"}
    sno = {f"vm-{i:03d}" for i in range(50) if i % 5 != 4 and i % 3 == 0}
    assert members(inv, "proxmox_cluster_sno") == sno
    assert members(inv, "proxmox_tag_proxshift_sno") == sno
    assert members(inv, "proxmox_pool_sno") == sno | {"ct-000"}
    ct = hostvars["ct-000"]
    assert (ct["proxmox_vmtype"], ct["proxmox_vmid"], ct["proxmox_node"], hostvars["vm-000"]["proxmox_vmtype"]) == (
        "lxc", 2000, "pve1", "qemu")
    # want_facts (want_config): the container's config flat, as community.proxmox gives it.
    assert (ct["proxmox_hostname"], ct["proxmox_memory"], ct["proxmox_ostype"]) == ("ct-000", 512, "debian")
    # Property strings split into dicts as community.proxmox does; the raw string stays in proxmox_config.
    assert ct["proxmox_net0"]["bridge"] == "vmbr0" and ct["proxmox_config"]["net0"].startswith("name=eth0,bridge=vmbr0")
    assert ct["proxmox_config"]["cores"] == 1 and ct["proxmox_snapshots"] == [] and "proxmox_qmpstatus" not in ct
    assert ct["proxmox_ipv4_addresses"] == ["10.2.0.1"], "eth0's address as Proxmox reads it from the container"
    assert [i["name"] for i in ct["proxmox_lxc_interfaces"]] == ["lo", "eth0"]
    assert "proxmox_lxc_interfaces" not in hostvars["ct-001"], "a stopped container's interfaces are not asked"
    assert "vm-004" not in members(inv, "proxmox_tag_worker")
    v = hostvars["vm-000"]
    assert (v["proxmox_vmid"], v["proxmox_node"], v["proxmox_status"]) == (1000, "pve1", "running")
    assert v["proxmox_tags"] == "proxshift-sno;worker" and v["proxmox_tags_parsed"] == ["proxshift-sno", "worker"]
    assert v["proxmox_clusters"] == ["sno"] and v["proxmox_qmpstatus"] == "running"
    assert hostvars["vm-001"]["proxmox_qmpstatus"] == "stopped"
    assert v["proxmox_pool"] == "sno"
    assert v["proxmox_ipv4_addresses"] == ["10.1.0.1"], "the guest agent's address, without loopback"
    assert v["proxmox_config"]["net0"].startswith("virtio=BC:24:11:00:00:00")
    assert v["proxmox_agent_enabled"] is True
    assert "proxmox_ipv4_addresses" not in hostvars["vm-001"], "a stopped VM's agent is not asked"


def test_compose_keyed_groups_groups_and_filters(sim50, inventory_token, tmp_path, run_inventory):
    extra = """
        compose:
          ansible_host: proxmox_ipv4_addresses | first
          memory_mib: proxmox_config.memory | int
        keyed_groups:
          - key: proxmox_clusters
            prefix: ocp
        groups:
          masters: "'master' in proxmox_tags_parsed"
        filters:
          - proxmox_status == 'running'
          - proxmox_clusters | length > 0
        """
    inv = listed(run_inventory(source(tmp_path, sim50, inventory_token, extra)))
    hosts = set(inv["_meta"]["hostvars"])
    running_owned = {f"vm-{i:03d}" for i in range(0, 50, 2) if i % 5 != 4}
    assert hosts == running_owned
    assert inv["_meta"]["hostvars"]["vm-006"]["ansible_host"] == "10.1.0.7"
    assert inv["_meta"]["hostvars"]["vm-006"]["memory_mib"] == 2048
    assert members(inv, "ocp_ha") == {h for h in running_owned if int(h[3:]) % 3 == 2}
    # Only running VMs are hosts, and every running VM has an even index: no master (odd) remains.
    assert members(inv, "masters") == set()
    assert members(inv, "proxmox_all_stopped") == set(), "default groups hold only hosts that passed the filters"


def test_community_proxmox_style_entries_work_under_strict(sim50, inventory_token, tmp_path, run_inventory):
    """compose/groups/keyed_groups written for community.proxmox's inventory: flat config vars (property strings as
    dicts), the tag string and tags_parsed."""
    extra = """
        strict: true
        compose:
          memory_mib: proxmox_memory | int
          first_bridge: proxmox_net0.bridge
          first_mac: proxmox_net0.virtio | default(proxmox_net0.hwaddr)
          tag_text: proxmox_tags | default("")
        keyed_groups:
          - key: proxmox_tags_parsed | default([])
            prefix: t
        groups:
          sno: "'proxshift-sno' in (proxmox_tags_parsed | default([]))"
        """
    inv = listed(run_inventory(source(tmp_path, sim50, inventory_token, extra)))
    vm = inv["_meta"]["hostvars"]["vm-006"]
    assert vm["memory_mib"] == int(vm["proxmox_config"]["memory"]) == 2048
    assert (vm["first_bridge"], vm["first_mac"]) == ("vmbr0", vm["proxmox_config"]["net0"].split(",")[0].split("=")[1])
    assert vm["proxmox_tags_parsed"] == vm["tag_text"].split(";") == ["proxshift-sno", "worker"]
    assert inv["_meta"]["hostvars"]["ct-001"]["first_mac"] == "BC:24:11:CC:00:01"
    assert members(inv, "sno") == members(inv, "proxmox_cluster_sno") == members(inv, "t_proxshift_sno")


def test_second_run_is_served_from_the_cache(sim50, inventory_token, tmp_path, run_inventory):
    extra = f"""
        cache: true
        cache_plugin: ansible.builtin.jsonfile
        cache_connection: {tmp_path / 'inventory-cache'}
        cache_timeout: 3600
        """
    path = source(tmp_path, sim50, inventory_token, extra)
    first = listed(run_inventory(path))
    seq = sim50.last_seq()
    second = listed(run_inventory(path))
    assert second == first
    assert sim50.requests(seq) == [], "a cache hit sends no request to the API"
    assert list((tmp_path / "inventory-cache").iterdir()), "the cache plugin stored the listing"
    # --flush-cache reads the API again.
    listed(run_inventory(path, args=["--list", "--flush-cache"]))
    assert [r for r in sim50.requests(seq) if r["path"].endswith("/cluster/resources")]


def test_env_variables_and_secrets_never_shown(sim50, inventory_token, tmp_path, run_inventory):
    token_id, secret = inventory_token
    path = tmp_path / "proxmox.yml"
    path.write_text(f"plugin: proxshift.proxmox.proxmox\nca_path: {sim50.ca_path}\n")
    # What AWX's "Proxmox API token" credential injects (awx/credential_types): host, user, token name.
    env = {"PROXMOX_HOST": sim50.url, "PROXMOX_USER": "root@pam", "PROXMOX_TOKEN_ID": token_id.split("!")[1],
           "PROXMOX_TOKEN_SECRET": secret}
    out = tmp_path / "inventory.json"
    proc = run_inventory(path, args=["--list", "--output", str(out)], env=env, verbosity=3)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "vm-010" in json.loads(out.read_text())["_meta"]["hostvars"]
    assert secret not in proc.stdout + proc.stderr + out.read_text()

    # A wrong secret: a clear error (the token is named, its secret is not).
    proc = run_inventory(path, env={**env, "PROXMOX_TOKEN_SECRET": secret[:-4] + "0000"}, verbosity=3)
    out = proc.stdout + proc.stderr
    assert "proxshift.proxmox.proxmox" in out and "401" in out, out
    assert secret[:-4] not in out

    # An empty variable counts as unset (AWX renders an empty credential field as ""): PROXMOX_URL="" gives way
    # to PROXMOX_HOST, the next name the plugin's documentation lists for `url`.
    listed = tmp_path / "inventory-empty-url.json"
    proc = run_inventory(path, args=["--list", "--output", str(listed)], env={**env, "PROXMOX_URL": ""})
    assert proc.returncode == 0 and "vm-010" in listed.read_text(), proc.stdout + proc.stderr
    # Ansible resolved those variables, not the binary: the backend run alone with them has no url.
    proc = subprocess.run([str(collection_binary("proxmox")), "--inventory"], input=json.dumps({"ca_path": str(sim50.ca_path)}),
                          env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True, timeout=60)
    result = json.loads(proc.stdout)
    assert result["failed"] and "missing required arguments: url" in result["msg"], result
    assert secret not in proc.stdout + proc.stderr


def test_proxmox_vm_info_in_check_mode_sends_no_write(sim50, run_playbook):
    seq = sim50.last_seq()
    run = run_playbook(sim50.play("""
        - name: info
          proxshift.proxmox.proxmox_vm_info:
            cluster: compact
            tags: [master]
            network: true
          register: info
        - name: by vmid
          proxshift.proxmox.proxmox_vm_info:
            vmid: 9000
            config: false
    """), check=True)
    assert run.rc == 0, run.output
    info = run.task("info")
    assert info["changed"] is False
    want = [1000 + i for i in range(50) if i % 5 != 4 and i % 3 == 1 and i % 2 == 1]
    assert [vm["vmid"] for vm in info["vms"]] == want
    assert all(vm["clusters"] == ["compact"] and "config" in vm for vm in info["vms"])
    assert "agent_interfaces" not in info["vms"][0], "stopped VMs: no agent call"
    tpl = run.task("by vmid")["vms"]
    assert [(v["vmid"], v["template"], "config" in v) for v in tpl] == [(9000, True, False)]
    assert sim50.writes_since(seq) == []


def test_ansible_doc_renders_the_plugin(tmp_path):
    proc = subprocess.run([tool("ansible-doc"), "-t", "inventory", "proxshift.proxmox.proxmox"],
                          env=ansible_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "PROXMOX_TOKEN_SECRET" in proc.stdout and "keyed_groups" in proc.stdout and "cache_plugin" in proc.stdout
    assert "[WARNING]" not in proc.stderr, proc.stderr


def test_community_node_and_status_options(sim50, inventory_token, tmp_path, run_inventory):
    """community.proxmox's node options: the nodes are hosts in `proxmox_nodes` by default (filters do not
    drop them), `want_proxmox_nodes_ansible_host` sets the address of the first active interface with a
    gateway (pvesim's default `vmbr0`), `exclude_nodes` leaves them out; `want_facts` is accepted for
    `want_config`; `qemu_extended_statuses` puts a paused VM in `proxmox_all_paused`."""
    inv = listed(run_inventory(source(tmp_path, sim50, inventory_token, """
        want_proxmox_nodes_ansible_host: true
        filters: ["proxmox_status == 'running'"]
        """)))
    assert members(inv, "proxmox_nodes") == {"pve1", "pve2", "pve3"}
    hostvars = inv["_meta"]["hostvars"]
    assert [hostvars[n]["ansible_host"] for n in ("pve1", "pve2", "pve3")] == ["192.0.2.11", "192.0.2.12", "192.0.2.13"]
    assert "vm-001" not in hostvars, "the filters still apply to VMs"
    inv = listed(run_inventory(source(tmp_path, sim50, inventory_token, "exclude_nodes: true\nwant_facts: false\n",
                                      name="excluded.proxmox.yml")))
    assert "proxmox_nodes" not in inv and "pve1" not in inv["_meta"]["hostvars"], inv.get("proxmox_nodes")
    assert "proxmox_config" not in inv["_meta"]["hostvars"]["vm-000"], "want_facts: false reads no config"

    sim50.api("POST", "nodes/pve1/qemu/1000/status/suspend")
    try:
        for _ in range(100):
            if sim50.api("GET", "nodes/pve1/qemu/1000/status/current").get("qmpstatus") == "paused":
                break
            time.sleep(0.1)
        extended = source(tmp_path, sim50, inventory_token, "qemu_extended_statuses: true\n", name="ext.proxmox.yml")
        inv = listed(run_inventory(extended))
        assert members(inv, "proxmox_all_paused") == {"vm-000"}
        assert "vm-000" not in members(inv, "proxmox_all_running")
        assert inv["_meta"]["hostvars"]["vm-000"]["proxmox_qmpstatus"] == "paused"
        refused = run_inventory(source(tmp_path, sim50, inventory_token, "qemu_extended_statuses: true\nwant_facts: false\n",
                                       name="bad.proxmox.yml"))
        assert "qemu_extended_statuses needs want_facts" in refused.stdout + refused.stderr
    finally:
        sim50.api("POST", "nodes/pve1/qemu/1000/status/resume")


# What ours sets beside community.proxmox's variables (README, "A dynamic inventory"); the listing's
# pool, lock and HA state only on guests that have one.
PROXSHIFT_OWN_VARS = {"proxmox_clusters", "proxmox_config", "proxmox_agent_enabled", "proxmox_ipv4_addresses",
                      "proxmox_ipv6_addresses", "proxmox_template", "proxmox_maxmem", "proxmox_name",
                      "proxmox_pool", "proxmox_lock", "proxmox_hastate"}


def test_community_proxmox_plugin_on_the_same_source_gives_the_same_groups_and_vars(sim50, inventory_token, tmp_path,
                                                                                   run_inventory):
    """community.proxmox's own inventory plugin (PyPI's `ansible`, unmodified) and ours over the same
    pvesim, both with want_facts: the same hosts in the same default groups — VMs and containers by type
    (`proxmox_all_qemu`, `proxmox_all_lxc`, `proxmox_<node>_qemu`/`_lxc`), by status, by pool, the nodes —
    and every `proxmox_*` var it sets on a VM or a container (config keys flat, property strings as dicts,
    the tag string and list, qmpstatus, snapshots, agent and container interfaces) with the same value in
    ours, so a user's groups/keyed_groups/compose written for it keep working with ours. Templates are
    hosts in neither."""
    venv = community_proxmox_venv()
    site_packages = next((venv / "lib").glob("python3*/site-packages"))
    token_id, secret = inventory_token
    user, name = token_id.split("!")
    theirs_src = tmp_path / "community.proxmox.yml"
    theirs_src.write_text(textwrap.dedent(f"""\
        plugin: community.proxmox.proxmox
        url: {sim50.url}
        user: "{user}"
        token_id: "{name}"
        token_secret: "{secret}"
        want_facts: true
        filters: ["proxmox_lock is not defined"]
        """))
    env = ansible_env(tmp_path, {"ANSIBLE_COLLECTIONS_PATH": str(site_packages), "REQUESTS_CA_BUNDLE": str(sim50.ca_path)},
                      venv=venv)
    proc = subprocess.run([str(venv / "bin" / "ansible-inventory"), "-i", str(theirs_src), "--list"], env=env,
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    theirs = listed(proc)
    # A filter written for community.proxmox: a variable the API does not have is undefined in both
    # (a null or "" proxmox_lock once made ours return no host at all).
    ours = listed(run_inventory(source(tmp_path, sim50, inventory_token,
                                       'want_facts: true\nfilters: ["proxmox_lock is not defined"]\n')))
    default = [g for g in theirs if g.startswith("proxmox_") and members(theirs, g)]
    assert {"proxmox_all_lxc", "proxmox_pve1_lxc", "proxmox_all_qemu", "proxmox_nodes", "proxmox_pool_sno"} <= set(default), default
    for group in default:
        assert members(ours, group) == members(theirs, group), group
    nodes = {"pve1", "pve2", "pve3"}
    hosts = set(theirs["_meta"]["hostvars"]) - nodes
    assert hosts == set(ours["_meta"]["hostvars"]) - nodes == {f"vm-{i:03d}" for i in range(50)} | {"ct-000", "ct-001"}
    for host in sorted(hosts):
        mine, other = ours["_meta"]["hostvars"][host], theirs["_meta"]["hostvars"][host]
        facts = {k for k in other if k.startswith("proxmox_")}
        assert {k: mine.get(k) for k in facts} == {k: other[k] for k in facts}, host
        # The defined names too: ours adds only ProxShift's own, and those only where the API has the key.
        extra = {k for k in mine if k.startswith("proxmox_")} - facts
        assert extra <= PROXSHIFT_OWN_VARS, (host, sorted(extra - PROXSHIFT_OWN_VARS))
        assert None not in [mine[k] for k in extra], (host, {k: mine[k] for k in extra})
    # What the comparison covered: a running VM with the agent, a stopped VM, a running and a stopped container.
    vm, ct = theirs["_meta"]["hostvars"]["vm-000"], theirs["_meta"]["hostvars"]["ct-000"]
    assert {"proxmox_net0", "proxmox_scsi0", "proxmox_agent_interfaces", "proxmox_qmpstatus", "proxmox_snapshots",
            "proxmox_tags", "proxmox_tags_parsed", "proxmox_status", "proxmox_vmtype"} <= set(vm), sorted(vm)
    assert isinstance(vm["proxmox_net0"], dict) and vm["proxmox_tags"] == "proxshift-sno;worker"
    assert {"proxmox_rootfs", "proxmox_hostname", "proxmox_lxc_interfaces", "proxmox_net0"} <= set(ct), sorted(ct)
    assert "proxmox_qmpstatus" in theirs["_meta"]["hostvars"]["vm-001"]
