#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_openshift),
# which plugins/action/cluster_upgrade.py runs. The options must match the Rust argument spec of modules/cluster_upgrade; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_upgrade
short_description: Upgrade an OpenShift cluster through its ClusterVersion
description:
  - Upgrades an OpenShift 4 cluster to O(version) the way C(oc adm upgrade --to) does - by setting
    C(spec.desiredUpdate) of C(ClusterVersion version) - and waits for the cluster-version operator to finish.
  - The current version is the newest C(Completed) entry of C(status.history) (else the oldest entry, else
    C(status.desired.version)), as the cluster-version operator reckons it.
  - The target must be one of the updates the cluster offers (C(status.availableUpdates)). A minor such as
    V(4.19) takes the newest offered z-stream of that minor; an exact version such as V(4.19.7) only itself.
    A minor is met by any of its z-streams, so a cluster at 4.19.3 asked for V(4.19) is left alone; give the
    exact version to move to a newer z-stream.
  - Refused, with nothing changed, when the version would go down, when an update to another version is
    already under way, when the ClusterVersion reports C(Failing) or C(Invalid), when a ClusterOperator is
    C(Degraded=True) or C(Available=False), when C(Upgradeable=False) and the update changes the minor version
    (z-stream updates are allowed then, as the cluster-version operator allows them), and when the path is not
    offered (the message names the requested version and the offered ones).
  - C(spec.channel) is set to O(channel) (by default the current channel's prefix with the target's minor, for
    example C(fast-4.18) becomes C(fast-4.19); C(stable-<minor>) when there is none) before the target is
    chosen; the module then looks up to O(refresh_polls) times for the cluster to offer the target in the new
    channel, and sets the channel back when it does not.
  - A target the cluster lists only in C(status.conditionalUpdates) (not recommended for it) is refused naming
    each risk (name, message, URL), unless O(accept_risks) names every one of them.
  - An update to the requested version that is already under way (a rerun after a timeout) is waited for, not
    started again.
  - While it waits, a release the cluster-version operator does not accept (C(ReleaseAccepted=False), for
    example a payload it cannot retrieve or verify) still reported one poll after it was first seen ends the task
    at once with the operator's message, instead of waiting out O(timeout). So does C(Failing=True), but only once
    it is not transient, judged as C(oc adm upgrade status) does - the operator no longer C(Progressing), or
    C(Failing) for 20 minutes, or a ClusterOperator C(Available=False) for 20 or C(Degraded=True) for 40 minutes; a
    younger C(Failing=True) while it progresses (an operator briefly unavailable as its operands roll) is
    reported in RV(progress) and the operator retries.
  - With O(wait), it follows the update - the newest history entry and how many ClusterOperators report the
    target as their C(operator) version - until the history shows the target C(Completed) and
    C(status.desired.version) is the target.
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
extends_documentation_fragment:
  - proxshift.openshift.cluster
options:
  version:
    description:
      - The version to upgrade to - a minor (V(4.19), the newest offered z-stream of it) or an exact release
        (V(4.19.7)).
    type: str
    required: true
  channel:
    description:
      - The update channel (C(spec.channel)) to use, for example C(stable-4.19). Set before the target is chosen.
      - Default - the current channel's prefix (C(stable), C(fast), C(candidate), C(eus)) with the target's minor.
      - At the target version, only a channel given here is set.
    type: str
  image:
    description:
      - The release image for O(version) (an exact version). Without O(allow_explicit_image) it must be the image
        the cluster offers for that version (the same digest, for example from a mirror).
    type: str
  allow_explicit_image:
    description:
      - Force O(image) when the cluster does not offer O(version) - C(spec.desiredUpdate.force=true), so the
        cluster-version operator does not verify the image's signature. Only for images you have checked
        yourself. The other rules (no lowering, a healthy cluster, C(Upgradeable)) still hold.
    type: bool
    default: false
  accept_risks:
    description:
      - Names of the risks of a conditional update (C(status.conditionalUpdates[].risks[].name)) you accept. A
        target that is not recommended is updated to only when every one of its risks is named here (as
        C(oc adm upgrade --allow-not-recommended), but risk by risk).
    type: list
    elements: str
    default: []
  upgrade_path:
    description:
      - V(direct) updates only to a target the cluster offers (C(status.availableUpdates)) from its current version.
      - V(auto), when the target is not offered but the channel's updates lead towards it (4.18.5 -> 4.18.9 ->
        4.19), updates to the newest offered release short of the target, waits for it to complete, checks the
        cluster again under the same rules (health, C(Upgradeable), risks) and goes on, hop by hop, until the target.
        Between hops it waits while the machine config pools roll the last hop onto the nodes (the C(machine-config)
        ClusterOperator or the ClusterVersion C(Upgradeable=False) with reason C(PoolUpdating), which refuses the
        next minor hop). Needs O(wait).
    type: str
    choices: [direct, auto]
    default: direct
  wait:
    description: Wait for the update to complete. With V(false), the module returns once the update is requested.
    type: bool
    default: true
  timeout:
    description: How long to wait for the update (and for a new channel's updates), in seconds.
    type: int
    default: 10800
  poll_interval:
    description: Seconds between looks at the ClusterVersion and the ClusterOperators.
    type: int
    default: 30
  refresh_polls:
    description:
      - After a channel change, how many looks (O(poll_interval) apart) the cluster gets to offer the target in
        the new channel before the module gives up and sets the channel back.
    type: int
    default: 10
  pause_worker_pools:
    description:
      - With O(upgrade_path=auto) over more than one minor (an EUS-to-EUS update such as 4.16 to 4.18), a Control Plane
        Only update as OpenShift documents it - every MachineConfigPool but C(master) that is not paused already is
        paused (C(spec.paused)) before the first hop and resumed once the cluster is at the target, then the module
        waits until those pools have updated every machine. The workers update and reboot once, not once per hop.
      - A pool the module paused carries the annotation C(proxshift.io/paused-for-update); only such pools are
        resumed, by this run or by a rerun after a failure, never one an administrator paused.
      - Needs O(wait=true); C(false) updates the workers at every hop.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reads only, and reports the path (from, to, the channel change) that would be taken.
  diff_mode:
    support: full
    description: C(spec.channel) and C(spec.desiredUpdate) of the ClusterVersion, before and after.
notes:
  - Upgrades take an hour or more on a real cluster; raise O(timeout) or use O(wait=false) and check later with
    C(proxshift.openshift.cluster_auth) and its O(proxshift.openshift.cluster_auth#module:version) option.
seealso:
  - module: proxshift.openshift.cluster_auth
"""

EXAMPLES = r"""
- name: Upgrade to the newest 4.19 z-stream the cluster offers (channel stable-4.19)
  proxshift.openshift.cluster_upgrade:
    kubeconfig: "{{ install_dir }}/auth/kubeconfig"
    version: "4.19"

- name: Upgrade to an exact version on the fast channel, without waiting
  proxshift.openshift.cluster_upgrade:
    api_url: https://api.sno.example.com:6443
    api_key: "{{ ocp_token }}"
    ca_cert: /etc/pki/sno-ca-bundle.pem
    version: 4.19.7
    channel: fast-4.19
    wait: false

- name: Show the path only
  proxshift.openshift.cluster_upgrade:
    kubeconfig: "{{ install_dir }}/auth/kubeconfig"
    version: 4.19.7
  check_mode: true
"""

RETURN = r"""
msg:
  description: What happened.
  returned: always
  type: str
  sample: upgraded 4.18.5 -> 4.19.2 (channel 'stable-4.18' -> 'stable-4.19')
from:
  description: The version the cluster ran at the start.
  returned: success
  type: str
  sample: 4.18.5
paused_pools:
  description: The MachineConfigPools paused for a Control Plane Only update (O(pause_worker_pools)); in check mode, would be.
  returned: success
  type: list
  elements: str
resumed_pools:
  description: The pools paused by this module (this run or an earlier one) and resumed at the target, updated since.
  returned: success
  type: list
  elements: str
hops:
  description: With O(upgrade_path=auto), the releases updated to on the way to the target (not the target itself).
  returned: success
  type: list
  elements: str
  sample: [4.18.9]
to:
  description: The target version (in check mode with a channel change, the request, as the target is chosen from the new channel's offers).
  returned: success
  type: str
  sample: 4.19.2
requested:
  description: The version asked for.
  returned: always
  type: str
  sample: "4.19"
channel:
  description: The channel change, C(from) and C(to); null when the channel stays.
  returned: success
  type: dict
  sample: {from: stable-4.18, to: stable-4.19}
image:
  description: The release image set in C(spec.desiredUpdate).
  returned: an update was requested
  type: str
version:
  description: The version the cluster is at when the module returns (after a completed update, the target).
  returned: the cluster is at the target
  type: str
  sample: 4.19.2
progress:
  description:
    - The distinct states seen while waiting, in order - C(history) (the newest history entry), C(operators_updated)
      and C(operators_total), C(failing) and C(message) (the ClusterVersion's), C(done).
  returned: the module waited for an update
  type: list
  elements: dict
offered:
  description: The versions the cluster offers, newest first.
  returned: the path is not offered
  type: list
  elements: str
channel_restored:
  description: The channel set back after the new one did not offer the target.
  returned: the new channel did not offer the target
  type: str
"""
