#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_proxmox),
# which plugins/action/proxmox_vm_info.py runs. The options must match the Rust argument spec of modules/proxmox_vm_info; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: proxmox_vm_info
short_description: List Proxmox VE virtual machines with their status, tags, config and guest addresses
description:
  - Lists the QEMU VMs of a Proxmox VE cluster (one C(GET /cluster/resources?type=vm)), selected by name, VMID,
    node, tags or ProxShift cluster, with their node, status, tags, pool, lock and HA state. LXC containers are
    left out (the C(proxshift.proxmox.proxmox) inventory plugin lists them).
  - With O(config) (the default) each VM's configuration is returned too; with O(network) the addresses the
    QEMU guest agent reports for running VMs that have the agent enabled.
  - Only reads; it never changes anything, so it runs the same in check mode. This is the preferred way to
    read VMs; the same data feeds the C(proxshift.proxmox.proxmox) inventory plugin.
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
extends_documentation_fragment:
  - proxshift.proxmox.api
options:
  name:
    description:
      - Only VMs with this name (Proxmox does not require names to be unique, so several may match).
    type: str
  vmid:
    description:
      - Only the VM with this VMID. Selects a template too, without O(include_templates).
    type: int
  node:
    description:
      - Only VMs on this node.
    type: str
  tags:
    description:
      - Only VMs that carry every one of these tags.
    type: list
    elements: str
    default: []
  cluster:
    description:
      - Only VMs of this ProxShift cluster, that is VMs tagged O(cluster_tag_prefix) followed by the cluster name
        (C(proxshift-sno) for V(sno)).
    type: str
  cluster_tag_prefix:
    description:
      - The prefix of ownership tags, used by O(cluster) and for RV(vms[].clusters).
    type: str
    default: proxshift-
  config:
    description:
      - Read and return each VM's configuration (one request per VM, spread over 8 parallel requests).
    type: bool
    default: true
  network:
    description:
      - Read the guest agent's network interfaces of running VMs that have the agent enabled. A VM whose agent does
        not answer (yet) simply has no RV(vms[].agent_interfaces).
    type: bool
    default: false
  include_templates:
    description:
      - List templates too.
    type: bool
    default: false
notes:
  - Runs as a native binary on the controller or any host that reaches the Proxmox API; it needs no Python libraries.
  - The user or token needs C(VM.Audit) on the VMs (and C(VM.GuestAgent.Audit) or C(VM.Monitor) for O(network)).
attributes:
  check_mode:
    support: full
    description: The module only reads; check mode runs the same GET requests and returns the same answer.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
"""

EXAMPLES = r"""
- name: All VMs of the cluster sno with their config and guest addresses
  proxshift.proxmox.proxmox_vm_info:
    api_host: pve1.example.com
    api_token_id: ansible@pve!ocp
    api_token_secret: "{{ vault_pve_token }}"
    cluster: sno
    network: true
  register: sno_vms

- name: One VM by VMID, status only
  proxshift.proxmox.proxmox_vm_info:
    api_host: pve1.example.com
    api_token_id: ansible@pve!ocp
    api_token_secret: "{{ vault_pve_token }}"
    vmid: 4100
    config: false
  register: vm

- name: Running VMs tagged master on pve2
  proxshift.proxmox.proxmox_vm_info:
    api_host: pve1.example.com
    api_token_id: ansible@pve!ocp
    api_token_secret: "{{ vault_pve_token }}"
    node: pve2
    tags: [master]
  register: masters
"""

RETURN = r"""
msg:
  description: How many VMs were found.
  returned: always
  type: str
  sample: found 3 VMs
vms:
  description: The selected VMs, in VMID order.
  returned: success
  type: list
  elements: dict
  contains:
    vmid:
      description: The VMID.
      type: int
      sample: 4100
    vmtype:
      description: The guest type, always V(qemu) here (community.proxmox's C(proxmox_vmtype)).
      type: str
      sample: qemu
    name:
      description: The VM name.
      type: str
    node:
      description: The node the VM is on.
      type: str
    status:
      description: C(running) or C(stopped) (as C(/cluster/resources) reports it).
      type: str
    template:
      description: Whether the VM is a template.
      type: bool
    tags:
      description: The VM's tags.
      type: list
      elements: str
    clusters:
      description: ProxShift clusters named by the VM's ownership tags.
      type: list
      elements: str
    pool:
      description: The resource pool, or null.
      type: str
    lock:
      description: The lock (C(backup), C(migrate), ...), or null.
      type: str
    hastate:
      description: The HA state when the VM is HA-managed, or null.
      type: str
    maxmem:
      description: Configured memory in bytes.
      type: int
    config:
      description: The VM configuration (pending values applied), as Proxmox returns it.
      type: dict
      returned: when O(config) is true
    agent_enabled:
      description: Whether the config enables the QEMU guest agent.
      type: bool
      returned: when O(config) is true
    agent_interfaces:
      description: The guest agent's interfaces with C(name), C(mac) and C(ip_addresses) (C(ip), C(family), C(prefix)).
      type: list
      elements: dict
      returned: when O(network) is true and the agent answered
    ipv4_addresses:
      description: The guest's IPv4 addresses without loopback and link-local ones.
      type: list
      elements: str
      returned: when O(network) is true and the agent answered
    ipv6_addresses:
      description: The guest's IPv6 addresses without loopback and link-local ones.
      type: list
      elements: str
      returned: when O(network) is true and the agent answered
"""
