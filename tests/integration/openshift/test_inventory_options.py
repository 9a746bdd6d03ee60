"""The inventory reaches every ocp_manifests option (issue #19 item 1).

`test_every_option_has_an_inventory_path` and `test_inventory_variables_are_documented` read files only
(fast, no binaries); the rendering tests run `playbooks/tasks/cluster_model.yml` on an inventory with real
ansible-playbook, the second one up to the module itself (check mode: nothing written).
"""
from __future__ import annotations

import json
import re

import yaml

from testlib import REPO

STUB = REPO / "ansible_collections/proxshift/openshift/plugins/modules/ocp_manifests.py"
MODEL = REPO / "playbooks/tasks/cluster_model.yml"
ROLE_TASKS = REPO / "ansible_collections/proxshift/openshift/roles/manifests/tasks/main.yml"
INVENTORY_README = REPO / "inventory/README.md"
SITE = REPO / "playbooks/site.yaml"
PREFLIGHT = REPO / "playbooks/tasks/preflight.yml"

# Options that are not cluster settings: the role variable each comes from instead, which the playbooks
# set (openshift_install: `manifests_installer`, `manifests_openshift_install` or the name looked up on
# PATH; build_iso: site vs preflight). Anything else must be mapped in cluster_model.yml.
NOT_FROM_THE_MODEL = {
    "pull_secret": "manifests_pull_secret",
    "ssh_key": "manifests_ssh_key",
    "additional_trust_bundle": "manifests_trust_bundle",
    "output_dir": "manifests_output_dir",
    "openshift_install": "manifests_installer",
    "build_iso": "manifests_build_iso",
    "keep_build": "manifests_keep_build",
    "installer_only": "manifests_installer_only",
}
SET_BY_THE_PLAYBOOKS = {
    "manifests_pull_secret": [SITE, PREFLIGHT],
    "manifests_ssh_key": [SITE, PREFLIGHT],
    "manifests_trust_bundle": [SITE, PREFLIGHT],
    "manifests_output_dir": [SITE, PREFLIGHT],
    # The preflight checks the cluster's installer too; it builds no ISO and keeps no build.
    "manifests_openshift_install": [SITE, PREFLIGHT],
    "manifests_keep_build": [SITE],
    # The install phase alone chooses the cluster's installer without rendering anything.
    "manifests_installer_only": [SITE],
}
# The model's key for an option, where it differs (the role passes `manifests_cluster.name`).
MODEL_KEY = {"cluster_name": "name"}


def module_options() -> dict:
    docs = STUB.read_text().split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0]
    return yaml.safe_load(docs)["options"]


def model_task(name: str) -> dict:
    tasks = yaml.safe_load(MODEL.read_text())
    return next(t for t in tasks if t["name"].startswith(name))


def manifest_model() -> dict:
    return model_task("Describe the cluster for the manifests")["vars"]["manifest"]


def node_model() -> dict:
    return model_task("Describe each node and its VM")["vars"]["node"]


def role_module_args() -> dict:
    tasks = yaml.safe_load(ROLE_TASKS.read_text())
    task = next(t for t in tasks if "proxshift.openshift.ocp_manifests" in t)
    return task["proxshift.openshift.ocp_manifests"]


def test_every_option_has_an_inventory_path():
    options = module_options()
    model, nodes, role = manifest_model(), node_model(), role_module_args()
    missing = []
    for opt in options:
        if opt not in role:
            missing.append(f"{opt}: the manifests role does not pass it")
        if opt in NOT_FROM_THE_MODEL:
            var = NOT_FROM_THE_MODEL[opt]
            if var not in str(role[opt]):
                missing.append(f"{opt}: the role passes {role.get(opt)!r}, not {var}")
            continue
        key = MODEL_KEY.get(opt, opt)
        if key not in model:
            missing.append(f"{opt}: no key {key!r} in cluster_model.yml's manifest")
        elif f"manifests_cluster.{key}" not in str(role.get(opt)):
            missing.append(f"{opt}: the role does not take it from manifests_cluster.{key}")
    for sub in options["nodes"]["suboptions"]:
        if sub not in nodes:
            missing.append(f"nodes[].{sub}: no key in cluster_model.yml's node")
    assert not missing, "ocp_manifests options the inventory cannot reach:\n" + "\n".join(missing)
    # The role variables of the options set outside the model are set by the role's callers.
    for var, files in SET_BY_THE_PLAYBOOKS.items():
        for f in files:
            assert f"{var}:" in f.read_text(), f"{f.name} does not set {var}"


def inventory_variables() -> set[str]:
    text = json.dumps(manifest_model()) + json.dumps(node_model())
    return set(re.findall(r"cluster_vars\.(\w+)", text)) | set(re.findall(r"\bhost\.(\w+)", text))


def test_inventory_variables_are_documented():
    doc = INVENTORY_README.read_text()
    documented = set(re.findall(r"`(\w+)`", doc))
    undocumented = sorted(inventory_variables() - documented)
    assert not undocumented, f"inventory/README.md does not document {undocumented}"
    # The check itself sees the new variables (it cannot pass by finding nothing).
    assert {"network_config", "interface", "platform", "capabilities", "trust_bundle_policy"} <= inventory_variables()


INVENTORY = """
all:
  children:
    clusters:
      children:
        lab:
          vars:
            ansible_connection: local
            ocp_version: "4.19"
            base_domain: example.com
            machine_network: 192.168.50.0/24
            gateway: 192.168.50.1
            dns_servers: [192.168.50.2]
            api_vip: 192.168.50.5
            ingress_vip: 192.168.50.6
            cluster_network: {cidr: 10.132.0.0/14, host_prefix: 24}
            service_network: 172.31.0.0/16
            network_type: OVNKubernetes
            ovn_internal_join_subnet: 100.99.0.0/16
            platform: baremetal
            load_balancer: UserManaged
            interface_name: enp1s0
            rendezvous_ip: 192.168.50.11
            fips: true
            capabilities: {baseline_capability_set: None, additional_enabled_capabilities: [baremetal, Ingress, MachineAPI]}
            trust_bundle_policy: Always
            iso_max_age_hours: 12
            extra_manifests: [manifests/99-a.yaml]
          hosts:
            m0: {mac: "BC:24:11:00:00:01", ip: 192.168.50.10, interface: ens19}
            m1: {mac: "BC:24:11:00:00:02", ip: 192.168.50.11, dhcp: true}
            m2:
              mac: "BC:24:11:00:00:03"
              ip: 192.168.50.12
              network_config:
                interfaces:
                  - {name: ens18, type: ethernet, state: up, mac-address: "BC:24:11:00:00:03"}
                  - name: ens18.50
                    type: vlan
                    state: up
                    vlan: {base-iface: ens18, id: 50}
                    ipv4: {enabled: true, dhcp: false, address: [{ip: 192.168.50.12, prefix-length: 24}]}
                dns-resolver: {config: {server: [192.168.50.2]}}
                routes:
                  config: [{destination: 0.0.0.0/0, next-hop-address: 192.168.50.1, next-hop-interface: ens18.50}]
"""

MODEL_PLAY = f"""
- hosts: localhost
  gather_facts: false
  vars:
    cluster_name: lab
  tasks:
    - name: model
      ansible.builtin.import_tasks: {MODEL}
    - name: show
      ansible.builtin.debug:
        var: cluster_manifest_input
"""


def test_cluster_model_maps_the_new_variables(run_playbook, tmp_path):
    run = run_playbook(MODEL_PLAY, inventory=INVENTORY)
    assert run.rc == 0, run.output
    got = run.task("show")["cluster_manifest_input"]
    assert got["cluster_networks"] == [{"cidr": "10.132.0.0/14", "host_prefix": 24}]
    assert got["service_networks"] == ["172.31.0.0/16"]
    assert got["ovn_internal_join_subnet"] == "100.99.0.0/16"
    assert (got["platform"], got["load_balancer"], got["interface_name"]) == ("baremetal", "UserManaged", "enp1s0")
    assert (got["rendezvous_ip"], got["fips"], got["iso_max_age_hours"]) == ("192.168.50.11", True, 12)
    assert got["additional_trust_bundle_policy"] == "Always"
    assert got["capabilities"]["additional_enabled_capabilities"] == ["baremetal", "Ingress", "MachineAPI"]
    nodes = {n["name"]: n for n in got["nodes"]}
    assert nodes["m0"]["interface"] == "ens19" and "interface" not in nodes["m1"]
    assert nodes["m1"]["dhcp"] is True and "dhcp" not in nodes["m0"]
    # Relative to the inventory's folder (the test's tmp_path).
    assert got["extra_manifests"] == [str(tmp_path / "manifests/99-a.yaml")]
    assert nodes["m2"]["network_config"]["interfaces"][1]["vlan"] == {"base-iface": "ens18", "id": 50}
    # Unset options stay unset: the module's own defaults apply.
    assert "proxy" not in got and "template_dir" not in got and "network_config" not in nodes["m0"]


ROLE_PLAY = f"""
- hosts: localhost
  gather_facts: false
  vars:
    cluster_name: lab
  tasks:
    - name: model
      ansible.builtin.import_tasks: {MODEL}
    - name: render
      ansible.builtin.import_role:
        name: proxshift.openshift.manifests
      vars:
        manifests_cluster: "{{{{ cluster_manifest_input }}}}"
        manifests_pull_secret: '{{"auths": {{"quay.io": {{"auth": "eA=="}}}}}}'
        manifests_output_dir: "{{{{ out_dir }}}}"
        manifests_check_only: true
"""


def test_new_variables_reach_the_module(run_playbook, tmp_path):
    """Through the manifests role to ocp_manifests itself (check mode): the module's own view of the
    inventory's settings, and its validation of them."""
    out = tmp_path / "out"
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests/99-a.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    run = run_playbook(ROLE_PLAY, inventory=INVENTORY, extra_vars={"out_dir": str(out)})
    assert run.rc == 0, run.output
    r = run.task("proxshift.openshift.manifests : Render and validate the manifests")
    args = r["invocation"]["module_args"]
    assert args["service_networks"] == ["172.31.0.0/16"]
    assert args["cluster_networks"] == [{"cidr": "10.132.0.0/14", "host_prefix": 24}]
    assert (args["platform"], args["load_balancer"], args["fips"]) == ("baremetal", "UserManaged", True)
    assert args["additional_trust_bundle_policy"] == "Always"
    assert args["capabilities"]["baseline_capability_set"] == "None"
    assert args["nodes"][2]["network_config"]["interfaces"][1]["name"] == "ens18.50"
    assert not r.get("failed"), r
    assert r["rendezvous_ip"] == "192.168.50.11"
    assert r["platform"] == "baremetal"
    ifaces = {n["name"]: n["interface"] for n in r["nodes"]}
    assert (ifaces["m0"], ifaces["m1"]) == ("ens19", "enp1s0")
    # m1 takes its address from DHCP: no networkConfig (its ip, the reservation, is still the rendezvous IP).
    configs = {n["name"]: n["nodes_config"] for n in r["nodes"]}
    assert "networkConfig" not in configs["m1"] and configs["m0"]["networkConfig"]
    assert r["extra_manifest_paths"] == [str(out / "openshift/99-a.yaml")]
    assert not out.exists(), "check mode wrote files"
