#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_proxmox),
# which plugins/action/proxmox_ha.py runs. The options must match the Rust argument spec of modules/proxmox_ha; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: proxmox_ha
short_description: Make a ProxShift cluster's VMs Proxmox HA resources and keep its control plane on different nodes
description:
  - Opt-in high availability for one ProxShift cluster. Its VMs (templates left out) are those that carry the
    cluster's tag (O(cluster_tag_prefix) followed by O(cluster)), O(owner_tag) when given and every one of O(tags).
  - Each VM becomes an HA resource (C(vm:<vmid>)) requested in O(ha_state); Proxmox's HA manager then restarts it
    on another node when its node fails.
  - On Proxmox VE 9 and later a negative resource-affinity rule (C(<rule_prefix><cluster>-control-plane)) keeps the
    O(control_plane) VMs on different nodes, also when the HA manager recovers them after a node failure (a VM with
    no allowed node waits in C(recovery) until one comes back). With O(spread_workers) the other VMs get a second
    one (C(<rule_prefix><cluster>-workers)). A rule needs two VMs or more, and no more than the cluster has nodes;
    otherwise no rule is made and the module warns.
  - Proxmox VE 8 has no resource affinity. There each VM of those two sets gets an HA group of its own,
    C(<rule_prefix><cluster>-<vmid>), that prefers a node no other VM of its set prefers (its home, priority 2),
    then the nodes that are no member's home (the spares, priority 1), and allows every other node below those (not
    restricted). The home is the node the VM runs on, or a free node when another VM of the set is there (Proxmox's
    HA manager then migrates it, and the module warns); a VM keeps its home on later runs. After a node failure its
    VM is restarted on a spare when one is online, and moves back home once its node returns (the groups fail
    back). With no spare node a lost node's VM runs beside another until its node is back; the module warns when it
    makes such groups.
  - Reconciles on every run - VMs added to the cluster are added, VMs gone from it are removed, rules and groups
    follow - and O(state=absent) removes every HA resource, rule and group it created. What it creates carries the
    comment C(proxshift:<cluster>); HA resources, rules and groups without it are never changed or removed (a VM
    that is already someone else's HA resource is left as it is, with a warning; a rule or group of the same ID is
    an error).
version_added: 3.0.0
author:
  - ProxShift developers (@proxshift)
extends_documentation_fragment:
  - proxshift.proxmox.api
options:
  cluster:
    description:
      - The ProxShift cluster name. Selects its VMs (with O(cluster_tag_prefix)), names the rules and marks what the
        module creates.
    type: str
    required: true
  tags:
    description:
      - Only VMs that also carry every one of these tags.
    type: list
    elements: str
    default: []
  owner_tag:
    description:
      - A tag the VMs must carry besides the cluster's. Unset, the cluster's tag is the owner tag, as the playbooks
        give it to C(proxshift.proxmox.proxmox_vm) (O(cluster_tag_prefix) followed by O(cluster)).
    type: str
  cluster_tag_prefix:
    description:
      - The prefix of cluster ownership tags (C(proxshift-sno) for V(sno)).
    type: str
    default: proxshift-
  state:
    description:
      - V(present) makes the VMs HA resources with their rules; V(absent) removes the HA resources and rules the
        module created for O(cluster).
    type: str
    choices: [present, absent]
    default: present
  control_plane:
    description:
      - Names or VMIDs of the VMs that must run on different nodes (control plane and arbiter). Each must be one of
        the selected VMs.
    type: list
    elements: str
    default: []
  spread_workers:
    description:
      - Keep the selected VMs that are not in O(control_plane) on different nodes too (a second rule).
    type: bool
    default: true
  ha_state:
    description:
      - The state the HA manager keeps the VMs in. V(started) starts a stopped VM at once.
    type: str
    choices: [started, stopped, ignored]
    default: started
  rule_prefix:
    description:
      - Prefix of the rule IDs, C(<rule_prefix><cluster>-control-plane) and C(<rule_prefix><cluster>-workers), and on
        Proxmox VE 8 of the group IDs, C(<rule_prefix><cluster>-<vmid>).
    type: str
    default: proxshift-
notes:
  - Runs as a native binary on the controller or any host that reaches the Proxmox API; it needs no Python libraries.
  - The user or token needs C(Sys.Audit) on C(/) to read and C(Sys.Console) on C(/) to change the HA configuration.
  - Deleting an HA resource leaves its VM running; destroying an HA-managed VM needs C(purge), which also drops it
    from the HA configuration.
attributes:
  check_mode:
    support: full
    description: Check mode reads, plans and reports the changes it would make without sending any.
  diff_mode:
    support: full
    description: The HA resources (with their requested state), rules and groups the module owns, before and after.
"""

EXAMPLES = r"""
- name: Compact cluster c1 - HA for its VMs, the three control-plane VMs on different nodes
  proxshift.proxmox.proxmox_ha:
    api_host: pve1.example.com
    api_token_id: ansible@pve!ocp
    api_token_secret: "{{ vault_pve_token }}"
    cluster: c1
    control_plane: [c1-master-0, c1-master-1, c1-master-2]

- name: Take cluster c1 out of HA before deprovisioning it
  proxshift.proxmox.proxmox_ha:
    api_host: pve1.example.com
    api_token_id: ansible@pve!ocp
    api_token_secret: "{{ vault_pve_token }}"
    cluster: c1
    state: absent
"""

RETURN = r"""
msg:
  description: What was (or, in check mode, would be) done, or that nothing needed doing.
  returned: always
  type: str
  sample: add vm:4101, create rule proxshift-c1-control-plane (vm:4101,vm:4102,vm:4103)
actions:
  description: The changes, in order (empty when nothing needed doing); on failure, those done before it.
  returned: always
  type: list
  elements: str
ha:
  description: The HA resources, rules and groups the module owns for the cluster after the run (predicted in check mode).
  returned: success
  type: dict
  contains:
    resources:
      description: HA resource id to requested state.
      type: dict
      sample: {"vm:4101": started}
    rules:
      description: Rule id to the resources it names.
      type: dict
      sample: {"proxshift-c1-control-plane": "vm:4101,vm:4102,vm:4103"}
    groups:
      description: Proxmox VE 8 only (empty otherwise) - group id to its nodes with their priorities and the resources bound to it.
      type: dict
      sample: {"proxshift-c1-4101": {"nodes": "pve1:2,pve4:1", "resources": "vm:4101"}}
"""
