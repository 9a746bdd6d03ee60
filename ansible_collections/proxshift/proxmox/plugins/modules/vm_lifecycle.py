#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_proxmox),
# which plugins/action/vm_lifecycle.py runs. The options must match the Rust argument spec of modules/vm_lifecycle; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: vm_lifecycle
short_description: Power, readiness and health of a cluster's Proxmox VE virtual machines
description:
  - Starts, stops, restarts, resets, pauses and resumes Proxmox VE VMs one at a time or a whole
    cluster at once, in the order OpenShift's agent installer wants (for example the rendezvous
    host first), with a bound on how many VMs are handled at the same time.
  - Idempotent. A VM already in the requested state gets no request. A paused VM is not running
    (the module reads C(qmpstatus), not only C(status)), so I(state=started) resumes it.
  - Waits for the real power state, not only the Proxmox task. This matters for HA-managed VMs,
    whose C(hastart)/C(hastop) task only asks the HA manager.
  - Waits (up to I(task_timeout)) for a config lock such as C(backup) or C(migrate) to clear
    before it sends anything, and follows a VM that a migration moved to another node.
  - Optionally waits until the guest agent answers or reports an address, and returns the
    guest's addresses.
  - I(state=status) is a read-only health report per VM. With I(remediate=true) it also starts
    owned VMs (those with the I(owner_tag) tag) that are stopped or paused. VMs without the tag are
    reported and never touched.
  - One VM's failure does not stop the others. An offline node (HTTP 595) or a failed task fails
    that VM with a clear message that includes the task log tail. The task fails when any VM
    failed, unless the only failures are unreachable nodes and I(ignore_unreachable=true). A start
    that fails for lack of host memory says so.
  - Uses the same connection options and environment variables as C(proxshift.proxmox.proxmox_vm)
    (and community.proxmox).
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
extends_documentation_fragment:
  - proxshift.proxmox.api
options:
  state:
    description:
      - C(started) boots stopped VMs and resumes paused ones.
      - C(stopped) sends an ACPI shutdown with I(timeout). Proxmox hard-stops the VM after the
        timeout only when I(force=true); without it a VM that does not shut down in time fails.
        A paused VM cannot shut down gracefully, so it needs I(force=true) and is then stopped
        hard.
      - C(restarted) reboots running VMs (ACPI reboot, which also applies pending config
        changes) and starts stopped ones. With I(force=true) it does a shutdown (forced after
        I(timeout)) and then a start instead. Always reports C(changed).
      - C(reset) does a hard reset of running VMs and starts stopped ones. Always reports
        C(changed).
      - C(paused) pauses running VMs in RAM. A stopped VM cannot be paused, so it fails.
      - C(resumed) resumes paused VMs. A stopped VM fails; use C(started) to boot it.
      - C(status) changes nothing unless I(remediate=true). It reports each VM's status.
        To only read VMs (by name, VMID, tag, node or cluster, with config and guest addresses) prefer
        M(proxshift.proxmox.proxmox_vm_info); C(status) stays for its health report and I(remediate).
    type: str
    required: true
    choices: [started, stopped, restarted, reset, paused, resumed, status]
  vmid:
    description:
      - The VM's ID.
      - With I(name) too, both must name the same VM.
      - Mutually exclusive with I(vms) and I(tags).
      - The VMID of an LXC container is refused, naming it; containers are never acted on (names and I(tags) do not
        match them either).
    type: int
  name:
    description:
      - The VM's name. A name shared by several VMs is an error that lists their IDs.
      - Mutually exclusive with I(vms) and I(tags).
    type: str
  vms:
    description:
      - Several VMs, each given as a vmid (integer or all-digit string) or a name.
      - Results keep this order unless I(order) says otherwise.
    type: list
    elements: raw
  tags:
    description:
      - Select every non-template VM that carries all of these Proxmox tags, compared without
        regard to case (Proxmox stores tags in lower case). Usually the cluster's ownership tag.
      - Selects in vmid order. If no VM matches, the module warns and changes nothing.
    type: list
    elements: str
  order:
    description:
      - Steps to handle the selected VMs in. Each item is one step, either one VM (vmid or name)
        or a list of VMs that are handled together.
      - Each step must finish (power state reached, and the I(wait_for) readiness met) before
        the next step begins.
      - VMs not listed form one last step. Every item must name one of the selected VMs, at most
        once.
      - To stop a cluster, give the reverse order (for example workers first).
    type: list
    elements: raw
  parallel:
    description: How many VMs of one step are handled at the same time (at least 1).
    type: int
    default: 4
  timeout:
    description:
      - Seconds the guest gets to react to an ACPI shutdown or reboot. Passed to Proxmox.
      - See I(force) for what happens when it runs out.
    type: int
    default: 120
  force:
    description:
      - With I(state=stopped), hard-stop a VM that did not shut down within I(timeout), and
        hard-stop paused VMs.
      - With I(state=restarted), do a shutdown (forced after I(timeout)) and then a start instead
        of an ACPI reboot.
    type: bool
    default: false
  wait_for:
    description:
      - How ready a VM that should run must be before its step counts as done.
      - C(running) means QEMU runs and the guest CPUs execute (C(qmpstatus=running)).
      - C(agent) also waits for the QEMU guest agent to answer.
      - C(ip) waits until the agent reports at least one routable address (not loopback, not
        link-local).
      - I(state=status) never waits; it reports the addresses the agent gives at that moment.
      - "C(agent) and C(ip) need C(agent=1) in the VM config. A VM without it fails straight
        away rather than waiting out I(wait_timeout)."
    type: str
    default: running
    choices: [running, agent, ip]
  wait_timeout:
    description: Seconds to wait per VM for the I(wait_for) readiness (agent or address).
    type: int
    default: 600
  task_timeout:
    description:
      - Seconds each Proxmox power task may take, and also how long to wait for a config lock to
        clear and for the real power state to follow (HA-managed VMs).
      - For shutdowns and reboots, I(timeout) is added on top.
    type: int
    default: 300
  remediate:
    description:
      - With I(state=status), start stopped owned VMs and resume paused ones, then report what
        was done (C(changed)).
      - Only VMs that carry I(owner_tag) are touched.
      - Setting it with any other state is an error.
    type: bool
    default: false
  owner_tag:
    description: The Proxmox tag that marks VMs as owned by ProxShift. I(remediate) acts only on VMs with it.
    type: str
    default: proxshift
  ignore_unreachable:
    description:
      - Do not fail the task when VMs could not be reached because their node is offline
        (HTTP 595/596). They are still reported (C(unreachable=true)) and warned about.
      - Other failures still fail the task.
    type: bool
    default: false
notes:
  - In check mode the module reads the VMs' state and reports what it would do. It sends no
    power request and does not wait.
  - With C(--diff) the diff shows each VM's power state (C(running), C(paused), C(stopped),
    C(unknown)) before and after.
  - C(restarted) and C(reset) always act, like restarting a service.
attributes:
  check_mode:
    support: full
    description: Reads only; reports the actions that would be sent and the resulting power states.
  diff_mode:
    support: full
    description: Shows each VM's power state before and after.
"""

EXAMPLES = r"""
- name: Boot a cluster, rendezvous host first, then the rest three at a time, and wait for addresses
  proxshift.proxmox.vm_lifecycle:
    api_host: pve1.example.com
    api_token_id: automation@pve!proxshift
    api_token_secret: "{{ proxmox_token_secret }}"
    tags: [ocp-prod]
    state: started
    order:
      - ocp-prod-master-0
    parallel: 3
    wait_for: ip
    wait_timeout: 900
  register: boot

- name: Show the address of every node
  ansible.builtin.debug:
    msg: "{{ boot.vms | items2dict(key_name='name', value_name='ips') }}"

- name: Shut the cluster down gracefully, workers first, hard-stopping stragglers after 3 minutes
  proxshift.proxmox.vm_lifecycle:
    api_host: pve1.example.com
    tags: [ocp-prod]
    state: stopped
    order:
      - [ocp-prod-worker-0, ocp-prod-worker-1]
    timeout: 180
    force: true

- name: Health check that restarts owned node VMs that died, tolerating an offline Proxmox node
  proxshift.proxmox.vm_lifecycle:
    api_host: pve1.example.com
    tags: [ocp-prod]
    state: status
    remediate: true
    owner_tag: proxshift
    ignore_unreachable: true
  register: health

- name: Reboot two VMs by vmid and name, one at a time
  proxshift.proxmox.vm_lifecycle:
    api_host: pve1.example.com
    vms: [101, ocp-prod-master-1]
    state: restarted
    parallel: 1
    wait_for: agent

- name: Pause one VM by vmid and name
  proxshift.proxmox.vm_lifecycle:
    api_host: pve1.example.com
    api_user: root@pam
    api_password: "{{ proxmox_password }}"
    validate_certs: true
    ca_path: /etc/pki/proxmox-ca.pem
    api_port: 8006
    api_timeout: 60
    vmid: 105
    name: ocp-lab-sno
    state: paused
    task_timeout: 120

- name: Hard-reset a hung VM
  proxshift.proxmox.vm_lifecycle:
    api_host: pve1.example.com
    name: ocp-lab-sno
    state: reset
"""

RETURN = r"""
state:
  description: The requested state.
  returned: always
  type: str
  sample: started
vms:
  description:
    - One entry per selected VM, in the order they were handled (step by step).
    - On failure, the entries of every VM, including those that succeeded.
  returned: always
  type: list
  elements: dict
  contains:
    vmid:
      description: VM ID.
      type: int
      sample: 101
    name:
      description: VM name.
      type: str
      sample: ocp-prod-master-0
    node:
      description: The Proxmox node the VM is on.
      type: str
      sample: pve1
    step:
      description: The I(order) step (1-based) the VM was handled in.
      type: int
      sample: 1
    before:
      description: Power state before the task, one of C(running), C(paused), C(stopped), C(unknown).
      type: str
      sample: stopped
    after:
      description: Power state after the task (in check mode, the one the change would give).
      type: str
      sample: running
    changed:
      description: A power request was sent to this VM, or would be in check mode.
      type: bool
    failed:
      description: This VM could not be brought to the requested state, or could not be read.
      type: bool
    unreachable:
      description: The VM's node was offline or unreachable (HTTP 595/596).
      type: bool
    msg:
      description: What happened to this VM, or why it failed (with the task log tail for failed tasks).
      type: str
      sample: started; has an address
    actions:
      description: Power operations sent (or that would be sent), in order.
      type: list
      elements: str
      sample: [start]
    ips:
      description:
        - Routable guest addresses the QEMU guest agent reported.
        - Empty when the agent is disabled or not answering (it is not waited for unless
          I(wait_for) says so).
      type: list
      elements: str
      sample: [192.0.2.10]
    status:
      description: Proxmox C(status) (C(running) or C(stopped)); null when unreachable.
      type: str
    qmpstatus:
      description: QEMU's own state (C(running), C(paused), C(suspended), C(prelaunch), ...).
      type: str
    lock:
      description: The VM's config lock (C(backup), C(migrate), C(suspended), ...), or null.
      type: str
    uptime:
      description: Seconds since QEMU started; null when unreachable.
      type: int
    ha:
      description: HA state; null when the VM could not be read.
      type: dict
      contains:
        managed:
          description: The VM is an HA resource.
          type: bool
        state:
          description: The state the HA manager is asked to keep (C(started), C(stopped), ...).
          type: str
    owned:
      description: The VM carries I(owner_tag).
      type: bool
    tags:
      description: The VM's Proxmox tags.
      type: list
      elements: str
    task_log:
      description: Last lines of the failed task's log (only for a failed task).
      type: list
      elements: str
      returned: when a task failed
totals:
  description: Counts over all selected VMs.
  returned: always
  type: dict
  contains:
    vms:
      description: Number of selected VMs.
      type: int
    changed:
      description: VMs that were (or in check mode would be) changed.
      type: int
    unchanged:
      description: VMs that were already in the requested state.
      type: int
    failed:
      description: VMs that failed (including unreachable ones).
      type: int
    unreachable:
      description: VMs on an offline or unreachable node.
      type: int
    running:
      description: VMs running afterwards.
      type: int
    paused:
      description: VMs paused afterwards.
      type: int
    stopped:
      description: VMs stopped afterwards.
      type: int
  sample: {vms: 3, changed: 2, unchanged: 1, failed: 0, unreachable: 0, running: 3, paused: 0, stopped: 0}
msg:
  description: A one-line summary, or on failure the failed VMs' messages.
  returned: always
  type: str
  sample: "3 VMs: 2 changed, 1 already started"
diff:
  description: Each VM's power state before and after, keyed by C(name (vmid)).
  returned: with --diff, when something changed
  type: dict
"""
