# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thin shim: the Proxmox reads, host vars and default groups come from the collection's
`proxmox_vm_info` binary (`--inventory`, options as JSON on stdin); this file adds what only Ansible
can do — templated options, `filters`, `compose`, `groups`, `keyed_groups` and the inventory cache."""
from __future__ import annotations

DOCUMENTATION = r"""
name: proxmox
short_description: Proxmox VE virtual machines and containers as inventory hosts
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
description:
  - Lists the QEMU VMs and LXC containers of a Proxmox VE cluster as hosts, with their type (C(proxmox_vmtype),
    V(qemu) or V(lxc)), node, status, tags, pool, config and addresses as host vars. A VM's addresses are those the
    QEMU guest agent reports (when it is enabled and answers); a running container's are those Proxmox reads from it
    (C(GET /nodes/{node}/lxc/{vmid}/interfaces)).
  - Groups guests by type (C(proxmox_all_qemu), C(proxmox_all_lxc)), node and type (C(proxmox_<node>_qemu),
    C(proxmox_<node>_lxc)), status (C(proxmox_all_running)), pool (C(proxmox_pool_<pool>)), tag (C(proxmox_tag_<tag>))
    and ProxShift cluster (C(proxmox_cluster_<cluster>), from the C(proxshift-<cluster>) ownership tag), with
    community.proxmox's group names. Group names are lower case with C(_) for other characters.
  - The Proxmox nodes are hosts too, in C(proxmox_nodes) (see O(exclude_nodes)), as with community.proxmox.
  - The configuration file must be named C(proxmox.yml), C(proxmox.yaml) or end in C(.proxmox.yml) /
    C(.proxmox.yaml).
  - The Proxmox API calls run in the collection's native C(proxmox_vm_info) binary (the same client as the
    modules, with 8 requests in parallel); the plugin needs no Python libraries. Secrets (O(password),
    O(token_secret)) never appear in its output or errors.
  - Options may be templates, for example a token secret read with the C(proxshift.hashi_vault.kv) lookup.
extends_documentation_fragment:
  - constructed
  - inventory_cache
options:
  plugin:
    description: The name of this plugin; always V(proxshift.proxmox.proxmox).
    required: true
    type: str
    choices: [proxshift.proxmox.proxmox]
  url:
    description:
      - The Proxmox API, C(https://pve1.example.com:8006) (port 8006 when none is given).
    type: str
    required: true
    env:
      - name: PROXMOX_URL
      - name: PROXMOX_HOST
  user:
    description:
      - User C(user@realm), for password auth or combined with a token name in O(token_id).
    type: str
    env:
      - name: PROXMOX_USER
  password:
    description:
      - Password of O(user) (ticket auth). Prefer API tokens.
    type: str
    env:
      - name: PROXMOX_PASSWORD
  token_id:
    description:
      - API token name (combined with O(user)) or full id C(user@realm!name).
    type: str
    env:
      - name: PROXMOX_TOKEN_ID
  token_secret:
    description:
      - API token secret.
    type: str
    env:
      - name: PROXMOX_TOKEN_SECRET
  validate_certs:
    description:
      - Verify the API's TLS certificate. When false the module warns that the certificate is not verified.
    type: bool
    default: true
    env:
      - name: PROXMOX_VALIDATE_CERTS
  ca_path:
    description:
      - PEM file with the CA that signed the API certificate (Proxmox's cluster CA), trusted in addition to the
        system store.
    type: path
    env:
      - name: PROXMOX_CA_PATH
  timeout:
    description:
      - Seconds per HTTP request.
    type: int
    default: 30
  want_config:
    description:
      - Read each guest's configuration into C(<facts_prefix>config) and flat host vars, its snapshot names and a
        running VM's C(qmpstatus) (up to three requests per VM or container, as community.proxmox).
      - C(want_facts) is community.proxmox's name for it (whose default is V(false)).
    type: bool
    default: true
    aliases: [want_facts]
  want_agent_interfaces:
    description:
      - Read the guest agent's interfaces of running VMs with the agent enabled into
        C(<facts_prefix>agent_interfaces), C(<facts_prefix>ipv4_addresses) and C(<facts_prefix>ipv6_addresses)
        (loopback and link-local addresses left out).
      - Read the interfaces of running containers into C(<facts_prefix>lxc_interfaces) (community.proxmox's name; each with
        C(name), C(hwaddr), C(inet), C(inet6)) and the same C(<facts_prefix>ipv4_addresses) and
        C(<facts_prefix>ipv6_addresses).
    type: bool
    default: true
  include_templates:
    description:
      - List templates too.
    type: bool
    default: false
  group_prefix:
    description:
      - Prefix of the groups this plugin makes.
    type: str
    default: proxmox_
  facts_prefix:
    description:
      - Prefix of the host vars this plugin sets.
    type: str
    default: proxmox_
  cluster_tag_prefix:
    description:
      - Prefix of ownership tags; a VM tagged C(<prefix><cluster>) is in the group C(<group_prefix>cluster_<cluster>).
    type: str
    default: proxshift-
  qemu_extended_statuses:
    description:
      - Group running VMs by their C(<facts_prefix>qmpstatus) (read with O(want_config)), so paused and prelaunch VMs are in
        C(<group_prefix>all_paused) and C(<group_prefix>all_prelaunch) instead of C(<group_prefix>all_running), as
        community.proxmox does. Needs O(want_config).
    type: bool
    default: false
  exclude_nodes:
    description:
      - Leave the Proxmox nodes out. By default (as community.proxmox) each node is a host too, in the group
        C(<group_prefix>nodes); O(filters) do not apply to nodes, O(compose) does (never strictly, so an expression
        over VM facts leaves a node's variable unset).
    type: bool
    default: false
  want_proxmox_nodes_ansible_host:
    description:
      - Set each online node's C(ansible_host) to the address of its first interface (by name) that is active and
        has an address and a gateway (C(GET /nodes/{node}/network)), as community.proxmox chooses it.
    type: bool
    default: false
  filters:
    description:
      - Jinja conditionals on a host's vars; only hosts for which all are true are added.
    type: list
    elements: str
    default: []
notes:
  - Host names are VM names and container host names; a VM without one is C(vm-<vmid>), and a name shared by several
    guests becomes C(<name>-<vmid>) for all but the lowest VMID (with a warning).
  - Host vars (with O(facts_prefix)) are C(vmid), C(vmtype) (V(qemu) or V(lxc)), C(name), C(node), C(status),
    C(template), C(tags) (the tag string as Proxmox keeps it, C(a;b)), C(tags_parsed) (the list), C(clusters), C(pool),
    C(lock), C(hastate), C(maxmem); with O(want_config) C(config) (the raw config), C(snapshots) (the snapshot names),
    for VMs C(qmpstatus) and C(agent_enabled), and every config key flat; with O(want_agent_interfaces)
    C(agent_interfaces) (VMs) or C(lxc_interfaces) (containers), C(ipv4_addresses) and C(ipv6_addresses).
  - A var whose key the API leaves out is not set at all (no null, no empty string) - C(tags) and C(tags_parsed) on an
    untagged guest, C(pool), C(lock) and C(hastate) on a guest without one - as community.proxmox leaves them
    undefined, so its users' filters such as C(proxmox_lock is not defined) keep the guest.
  - The vars community.proxmox's inventory sets have its names and shapes, so C(compose), C(groups) and
    C(keyed_groups) written for it work unchanged (a test runs both plugins over the same cluster and compares them).
    Each config key is C(<facts_prefix><key>) and a property string whose comma-separated parts all hold C(=) is a
    dict, as there - C(proxmox_net0.bridge), C(proxmox_ipconfig0.ip), C(proxmox_scsi0.size) (disk keys, C(rootfs)
    and keys starting with C(virtio), C(sata), C(ide) or C(scsi), C(scsihw) included, get their volume as
    C(disk_image)); C(description) stays text and the raw strings stay in C(config). C(agent_interfaces) is a list of
    C({name, mac-address, ip-addresses}) (addresses as C(ip/prefix)), C(lxc_interfaces) of
    C({name, hwaddr, inet, inet6}), each set only when there is an interface.
  - Templates are left out (as community.proxmox does) unless O(include_templates).
  - In AWX/AAP use it as an inventory source from a project (a C(proxmox.yml) file) with the
    C(PROXMOX_*) variables injected by a credential.
"""

EXAMPLES = r"""
# proxmox.yml — every VM, a group per ProxShift cluster, SSH to the first guest-agent address
plugin: proxshift.proxmox.proxmox
url: https://pve1.example.com:8006
token_id: ansible@pve!inventory
token_secret: "{{ lookup('proxshift.hashi_vault.kv', 'proxmox/inventory', key='secret') }}"
ca_path: /etc/pki/pve-root-ca.pem
compose:
  ansible_host: proxmox_ipv4_addresses | first | default(omit)
keyed_groups:
  - key: proxmox_tags_parsed
    prefix: tag
groups:
  ocp_masters: "'master' in proxmox_tags_parsed"
  on_vmbr1: "proxmox_net0.bridge | default('') == 'vmbr1'"
filters:
  - proxmox_status == 'running'
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/ansible-inventory
cache_timeout: 300
"""

import os

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable
from ansible.utils.unsafe_proxy import wrap_var
from ansible_collections.proxshift.proxmox.plugins.plugin_utils.binary_module import backend_options, run_backend

try:  # ansible-core >= 2.19 (data tagging): text from a plugin is untrusted, never templated, unless tagged
    from ansible._internal._datatag._tags import TrustedAsTemplate
except ImportError:  # older cores template any plain string: wrap it
    TrustedAsTemplate = None
MARK_UNSAFE = TrustedAsTemplate is None


# The options the binary takes (its Rust spec); the rest are Ansible's (constructed, cache).
BACKEND_OPTIONS = (
    "url", "user", "password", "token_id", "token_secret", "validate_certs", "ca_path", "timeout",
    "want_config", "want_agent_interfaces", "include_templates", "group_prefix", "facts_prefix",
    "cluster_tag_prefix", "qemu_extended_statuses", "exclude_nodes", "want_proxmox_nodes_ansible_host",
)


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "proxshift.proxmox.proxmox"

    def verify_file(self, path):
        if not super().verify_file(path):
            return False
        base = os.path.basename(path)
        return base in ("proxmox.yml", "proxmox.yaml") or base.endswith((".proxmox.yml", ".proxmox.yaml"))

    def _listing(self, path, cache):
        key = self.get_cache_key(path)
        use_cache = self.get_option("cache") and cache
        update = self.get_option("cache") and not cache
        if use_cache:
            try:
                return self._cache[key]
            except KeyError:
                update = True
        result = run_backend("--inventory", backend_options(self, BACKEND_OPTIONS, self.templar), self.NAME, AnsibleParserError)
        listing = {"hosts": result.get("hosts", {}), "nodes": result.get("nodes", {}), "groups": result.get("groups", {})}
        if update:
            self._cache[key] = listing
        return listing

    def _passes(self, host, hostvars, strict):
        for condition in self.get_option("filters"):
            try:
                if not boolean(self._compose(condition, hostvars), strict=False):
                    return False
            except Exception as e:
                if strict:
                    raise AnsibleParserError(f"{self.NAME}: filter {condition!r} failed for {host}: {to_native(e)}")
                return False
        return True

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        listing = self._listing(path, cache)
        strict = self.get_option("strict")
        added = set()
        for host, hostvars in listing["hosts"].items():
            if MARK_UNSAFE:  # API text (descriptions, names) is never templated
                hostvars = wrap_var(hostvars)
            if not self._passes(host, hostvars, strict):
                continue
            self.inventory.add_host(host)
            added.add(host)
            for key, value in hostvars.items():
                self.inventory.set_variable(host, key, value)
            self._set_composite_vars(self.get_option("compose"), hostvars, host, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, host, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, host, strict=strict)
        # Proxmox nodes (exclude_nodes: false): added whatever the filters say and composed, as community.proxmox
        # does, but never strictly: compose written for the VMs' facts must not fail a `strict` source on a node.
        for node, nodevars in listing.get("nodes", {}).items():
            self.inventory.add_host(node)
            added.add(node)
            for key, value in nodevars.items():
                self.inventory.set_variable(node, key, value)
            self._set_composite_vars(self.get_option("compose"), self.inventory.get_host(node).get_vars(), node, strict=False)
        for group, members in listing["groups"].items():
            kept = [h for h in members if h in added]
            if kept:
                self.inventory.add_group(group)
                for host in kept:
                    self.inventory.add_child(group, host)
