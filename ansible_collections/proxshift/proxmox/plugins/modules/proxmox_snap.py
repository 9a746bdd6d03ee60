#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_proxmox),
# which plugins/action/proxmox_snap.py runs. The options must match the Rust argument spec of modules/proxmox_snap; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: proxmox_snap
short_description: Take, remove and roll back Proxmox VE snapshots of a VM or of a whole cluster's VMs
description:
  - Manages the snapshot O(snapname) of one QEMU VM (O(vmid) and/or O(hostname)) or of every VM carrying all of
    O(tags) (a ProxShift cluster's VMs), as community.proxmox's C(proxmox_snap) does for one guest.
  - Only VMs carrying O(owner_tag) are ever written to. A VM named by O(vmid) or O(hostname) without it fails the
    task; VMs matching O(tags) without it are left alone with a warning.
  - O(state=present) takes the snapshot on every VM that lacks it (VMs that have it are left as they are), one VM
    after the other. Proxmox snapshots a running VM's disks as they are at that moment; a cluster's restore point
    is taken with its VMs stopped (C(playbooks/restore_point.yaml)). Every snapshot this module takes carries the
    line C([proxshift.proxmox.proxmox_snap]) in its description; O(retention) only ever removes snapshots with it.
  - O(state=absent) removes the snapshot from every VM that has it.
  - O(state=rollback) rolls every VM back to the snapshot. Every VM must have it, and none may be running unless
    O(force=true) (Proxmox stops a running VM hard, without shutting its guest down, before it rolls it back —
    qemu-server's C(rollback)). A VM whose snapshot holds its RAM (O(vmstate)) is running again afterwards;
    any other VM stays stopped. A rollback always counts as a change.
  - Everything that would refuse the task (a locked VM, a missing snapshot, a running VM, and for O(state=present) a
    VM with a disk whose storage cannot take snapshots as Proxmox's C(feature) check reports it, such as a raw file
    on a directory, NFS or CIFS storage, or plain LVM) is found before the first write, and the task then changes
    nothing. Each Proxmox task is waited for (O(timeout)); a failure stops
    O(state=present) and O(state=rollback) at that VM and the result says which VMs have the snapshot (RV(have))
    or were rolled back; O(state=absent) goes on with the other VMs.
version_added: 3.0.0
author:
  - ProxShift developers (@proxshift)
extends_documentation_fragment:
  - proxshift.proxmox.api
options:
  vmid:
    description:
      - The VMID of the one VM to act on.
    type: int
  hostname:
    description:
      - The name of the one VM to act on. With O(vmid) both must name the same VM. A name several VMs carry is
        refused (use O(vmid)).
    type: str
    aliases: [name]
  tags:
    description:
      - Act on every VM (templates and containers aside) that carries all of these tags, in VMID order.
    type: list
    elements: str
  owner_tag:
    description:
      - The Proxmox tag that marks VMs this project owns (a ProxShift cluster's C(proxshift-<cluster>)). Only VMs
        with it are written to.
    type: str
    default: proxshift
  state:
    description:
      - V(present) takes the snapshot where it is missing, V(absent) removes it, V(rollback) rolls the VMs back to
        it.
    type: str
    choices: [present, absent, rollback]
    default: present
  snapname:
    description:
      - The snapshot's name. Proxmox's grammar (its C(pve-configid) format, at most 40 characters) is a letter, then
        letters, digits, C(_) or C(-); C(current) and C(pending) are reserved. A name that breaks it fails the task
        before any request.
    type: str
    required: true
  description:
    description:
      - Text stored with a new snapshot (the module adds its marker line after it).
    type: str
  vmstate:
    description:
      - Save a running VM's RAM with the snapshot. A rollback to such a snapshot leaves the VM running.
    type: bool
    default: false
  retention:
    description:
      - With O(state=present), keep only this many of the snapshots this module made whose names start with
        O(retention_prefix) on each VM, O(snapname) always among them; older ones (by their time) are removed,
        oldest first. V(0) keeps every snapshot. Snapshots made otherwise are never removed.
    type: int
    default: 0
  retention_prefix:
    description:
      - The name prefix of the series O(retention) counts. Default O(snapname) without its trailing digits, C(_) and
        C(-) (C(restore-20261207-1000) counts with every C(restore...) snapshot of this module). O(snapname) must
        start with it.
    type: str
  force:
    description:
      - With O(state=rollback), roll back running VMs too (Proxmox stops them hard first).
      - With O(state=absent) and retention, Proxmox's own C(force) of a removal is sent too (the snapshot leaves the
        config even when removing a disk's snapshot fails).
    type: bool
    default: false
  timeout:
    description:
      - Seconds to wait for each Proxmox task (one snapshot, removal or rollback of one VM).
    type: int
    default: 300
notes:
  - Runs as a native binary on the controller or any host that reaches the Proxmox API; it needs no Python libraries.
  - The user or token needs C(VM.Snapshot) on the VMs (C(VM.Snapshot.Rollback) for O(state=rollback)), and
    C(VM.Audit) to read them.
  - Unlike community.proxmox's module, O(snapname) has no default, O(timeout) is per task, and a snapshot the task
    asks for that already exists is left as it is (not an error).
attributes:
  check_mode:
    support: full
    description: Reads the VMs and their snapshots and reports what would be taken, removed or rolled back; sends no write.
  diff_mode:
    support: full
    description: Each VM's snapshot names before and after.
"""

EXAMPLES = r"""
- name: A restore point of the stopped cluster c1, keeping the 3 newest
  proxshift.proxmox.proxmox_snap:
    api_host: pve1.example.com
    api_token_id: ansible@pve!ocp
    api_token_secret: "{{ vault_pve_token }}"
    tags: [proxshift-c1]
    owner_tag: proxshift-c1
    snapname: "restore-{{ now(utc=true, fmt='%Y%m%d-%H%M%S') }}"
    description: before the upgrade to 4.19.7
    retention: 3
  register: restore_point

- name: Roll the cluster c1 back to it (its VMs stopped first)
  proxshift.proxmox.proxmox_snap:
    api_host: pve1.example.com
    api_token_id: ansible@pve!ocp
    api_token_secret: "{{ vault_pve_token }}"
    tags: [proxshift-c1]
    owner_tag: proxshift-c1
    snapname: "{{ restore_point.snapname }}"
    state: rollback

- name: Remove a snapshot of one VM
  proxshift.proxmox.proxmox_snap:
    api_host: pve1.example.com
    api_token_id: ansible@pve!ocp
    api_token_secret: "{{ vault_pve_token }}"
    vmid: 4100
    owner_tag: proxshift-c1
    snapname: before-test
    state: absent
"""

RETURN = r"""
msg:
  description: What was done (or would be, in check mode), or why the task failed and which VMs have the snapshot.
  returned: always
  type: str
  sample: snapshot 'restore-20261207-1000' taken of 3 VMs; 0 VMs had it already
snapname:
  description: The snapshot's name.
  returned: when the options were valid
  type: str
have:
  description: VMIDs of the VMs that hold the snapshot after the task (or would, in check mode).
  returned: when the VMs were read
  type: list
  elements: int
vms:
  description: One entry per VM acted on, in VMID order.
  returned: when the VMs were read
  type: list
  elements: dict
  contains:
    vmid:
      description: The VMID.
      type: int
    name:
      description: The VM name.
      type: str
    node:
      description: The node the VM is on.
      type: str
    action:
      description:
        - V(created), V(exists), V(deleted), V(absent), V(rolled back); V(failed) (see RV(vms[].msg)) or
          V(not reached) (an earlier VM failed).
      type: str
    changed:
      description: Whether this VM changed (or would, in check mode).
      type: bool
    pruned:
      description: Snapshots O(retention) removed (or would remove).
      type: list
      elements: str
    snapshots:
      description: The VM's snapshot names after the task, oldest first.
      type: list
      elements: str
    msg:
      description: Why this VM failed.
      type: str
      returned: when this VM failed
"""
