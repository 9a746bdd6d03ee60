#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_proxmox),
# which plugins/action/proxmox_access.py runs. The options must match the Rust argument spec of modules/proxmox_access; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: proxmox_access
short_description: Least-privilege Proxmox VE access for automation (role, user, ACLs, API token)
description:
  - Creates or converges a Proxmox VE role with exactly the listed privileges, a user, the role on
    ACL paths for that user, and an API token of that user, instead of giving automation a
    C(PVEAdmin) or C(root@pam) token.
  - With I(privsep=true) (the default) the token has privilege separation, so it has only the ACL
    entries given to the token itself; the module grants the role to the token on the same paths.
  - Idempotent. Privileges are compared as a set and replaced when they differ; missing ACL entries
    are added (ACL entries of other roles, users or paths are left alone).
  - The token secret is returned only by the run that creates the token, because Proxmox VE shows
    it only once. Put C(no_log) on the task and store I(token_secret) straight away (for example in
    Vault with C(proxshift.hashi_vault.hashicorp_vault)).
  - I(state=absent) removes the managed ACL entries, the token and the role. The user is kept (it
    may own other tokens); remove it in the Proxmox VE UI when no longer needed.
  - The connection needs C(Sys.Audit) and C(Permissions.Modify) on C(/), C(User.Modify) on
    C(/access/groups) and C(Realm.AllocateUser) on the realm, which C(root@pam) has.
  - Uses the same connection options and environment variables as C(proxshift.proxmox.proxmox_vm).
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
extends_documentation_fragment:
  - proxshift.proxmox.api
options:
  state:
    description:
      - C(present) creates or converges the role, user, token and ACL entries.
      - C(absent) removes the managed ACL entries, the token (when I(token) is set) and the role.
    type: str
    default: present
    choices: [present, absent]
  role:
    description:
      - Role ID, for example C(ProxShiftProvisioner). A letter, then letters, digits, C(-), C(_) or C(.).
    type: str
    required: true
  privileges:
    description:
      - The role's privileges, exactly (privileges not listed are removed from the role).
      - Each must be a privilege the server knows (the built-in C(Administrator) role lists them).
      - The guest agent privilege takes the server's name, with a warning (on PVE 8 any C(VM.GuestAgent.*)
        becomes C(VM.Monitor), on PVE 9 C(VM.Monitor) becomes C(VM.GuestAgent.Audit)).
      - Required with I(state=present).
    type: list
    elements: str
  user:
    description:
      - The user, as C(name@realm). Created in the C(pve) realm without a password when missing.
    type: str
    required: true
  token:
    description:
      - The API token's name (the part after C(!)). Without it no token is managed.
    type: str
  privsep:
    description:
      - Privilege separation for the token. When true the token gets the role on I(acl_paths) itself;
        when false it has the user's privileges and the token's own entries for the role are removed.
    type: bool
    default: true
  token_comment:
    description: The token's comment.
    type: str
    default: ProxShift automation
  acl_paths:
    description:
      - ACL paths that get the role for the user (and for a privilege-separated token), for example
        C(/), or C(/vms) and C(/storage/local-lvm) for a narrower grant.
    type: list
    elements: str
    default: ["/"]
  propagate:
    description: Whether the ACL entries apply to everything below their path.
    type: bool
    default: true
notes:
  - Check mode is supported; nothing is written and I(actions) lists what would be done.
  - Diff mode shows the managed objects before and after.
"""

EXAMPLES = r"""
- name: Least-privilege access for ProxShift
  proxshift.proxmox.proxmox_access:
    api_host: pve1.example.com
    api_user: root@pam
    api_password: "{{ pve_root_password }}"
    role: ProxShiftProvisioner
    privileges: [VM.Allocate, VM.Audit, VM.Config.Disk, VM.Config.CPU, VM.Config.Memory, VM.PowerMgmt]
    user: proxshift@pve
    token: ansible
    privsep: true
    acl_paths: ["/"]
  register: access
  no_log: true

- name: Remove the token, its ACL entries and the role
  proxshift.proxmox.proxmox_access:
    api_host: pve1.example.com
    role: ProxShiftProvisioner
    user: proxshift@pve
    token: ansible
    state: absent
"""

RETURN = r"""
actions:
  description: What was done (or, in check mode, would be done), in order.
  returned: always
  type: list
  elements: str
  sample: ["create role ProxShiftProvisioner (VM.Audit,VM.PowerMgmt)", "create user proxshift@pve"]
role:
  description: The role after the run (C(null) when absent).
  returned: always
  type: dict
  contains:
    roleid:
      description: Role ID.
      type: str
      sample: ProxShiftProvisioner
    privileges:
      description: Its privileges, sorted.
      type: list
      elements: str
      sample: [VM.Audit, VM.PowerMgmt]
user:
  description: The user ID when the user exists after the run, else C(null).
  returned: always
  type: str
  sample: proxshift@pve
token:
  description: The token after the run (C(null) when there is none).
  returned: always
  type: dict
  contains:
    full_tokenid:
      description: The full token ID, as C(api_token_id) takes it.
      type: str
      sample: proxshift@pve!ansible
    privsep:
      description: Privilege separation.
      type: bool
      sample: true
    comment:
      description: The token's comment.
      type: str
      sample: ProxShift automation
acls:
  description: The ACL entries of the role for the user and the token after the run.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: ACL path.
      type: str
      sample: /
    type:
      description: C(user) or C(token).
      type: str
      sample: token
    ugid:
      description: The user or full token ID.
      type: str
      sample: proxshift@pve!ansible
    roleid:
      description: The role.
      type: str
      sample: ProxShiftProvisioner
    propagate:
      description: Whether the entry propagates.
      type: bool
      sample: true
token_secret:
  description:
    - The new token's secret (a UUID). Proxmox VE shows it only once; use C(no_log) on the task.
  returned: when the token was created (not in check mode)
  type: str
  sample: 5e1e0c5a-7d2b-4c4e-9a51-000000000001
"""
