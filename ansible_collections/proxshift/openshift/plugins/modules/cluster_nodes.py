#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_openshift),
# which plugins/action/cluster_nodes.py runs. The options must match the Rust argument spec of modules/cluster_nodes; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_nodes
short_description: Approve the expected nodes' CSRs, wait for nodes to be Ready, drain and remove nodes
description:
  - Day-2 work on the Nodes of an OpenShift (or Kubernetes) cluster, for exactly the nodes named in O(nodes).
  - O(state=approved) approves the pending kubelet CertificateSigningRequests of the named nodes through the
    C(approval) subresource (C(certificates.k8s.io/v1)). A client CSR (signer
    C(kubernetes.io/kube-apiserver-client-kubelet)) is approved only when it was requested by
    O(bootstrap_username) in all of O(bootstrap_groups) and its PKCS#10 subject is exactly
    C(CN=system:node:NAME, O=system:nodes) without SANs. A serving CSR (signer C(kubernetes.io/kubelet-serving))
    is approved only when it was requested by C(system:node:NAME) in the group C(system:nodes), has the same
    subject, and its SANs are only the node's name, its first label and the entries of O(addresses) for it.
    Usages must be those a kubelet asks for.
  - As openshift/cluster-machine-approver does (C(authorizeNodeClientCSR)), a CSR created more than 10 seconds
    before its node's VM started (O(vm_uptimes)) is stale and left alone, a client CSR for a node whose Node object
    already exists (it joined) is never approved, and one client CSR per node is approved - none when one made
    since its VM started is already approved, else only the newest (pending or decided); all are returned in
    RV(skipped_csrs), not approved.
  - Nothing else is ever approved. Pending CSRs that are not for a named node are returned in
    RV(unexpected_csrs) and left alone. A CSR that claims a named node but fails a check (another requestor,
    another subject, a SAN that is not the node's) fails the task before anything is approved.
  - O(state=ready) waits until every named node exists and is C(Ready=True), at most O(timeout) seconds, and then
    names the nodes that are not. With O(approve_csrs=true) it approves their CSRs (as above) on every look, so
    joining nodes get their client and then their serving certificate while it waits.
  - O(state=drained) cordons each node (C(spec.unschedulable)) first, then lists and evicts every pod on it except DaemonSet-owned
    and mirror pods through the C(pods/eviction) subresource (its apiVersion as API discovery lists it,
    C(policy/v1beta1) before Kubernetes 1.22, C(policy/v1) after), then waits until the pods are gone. An
    eviction refused with HTTP 429 (a PodDisruptionBudget allows no disruption) is tried again each
    O(poll_interval) until O(drain_timeout); then the node is uncordoned again (when this task cordoned it) and
    the task fails naming each blocked pod and the budgets that cover it.
  - On a node whose kubelet is unreachable (C(Ready=Unknown) or the C(node.kubernetes.io/unreachable) taint of the
    node-lifecycle controller), no kubelet will ever confirm an evicted pod's end - it stays C(Terminating). Its
    pods are evicted with a grace period of 1 second (C(deleteOptions.gracePeriodSeconds)), not their own, and such
    a pod is no longer waited for once O(skip_wait_for_delete_timeout) seconds have passed since its
    C(deletionTimestamp) (the end of that grace period), as Cluster API's Machine controller and the OpenShift
    Machine API's drain controller drain unreachable nodes; it is returned in C(left_terminating) and the pod
    garbage collector removes it once the Node is deleted.
  - O(state=absent) drains each node as above, then deletes its Node object. A node that does not exist is
    left as it is (no change).
  - Control-plane nodes (label C(node-role.kubernetes.io/master) or C(node-role.kubernetes.io/control-plane))
    are refused for O(state=drained) and O(state=absent) unless O(allow_control_plane=true).
  - O(state=cordoned) and O(state=uncordoned) mark the nodes unschedulable or schedulable again (C(spec.unschedulable),
    as C(oc adm cordon) and C(oc adm uncordon) do), control-plane nodes included - the first step of OpenShift's
    graceful shutdown and the last of its restart. A node already so is left alone.
  - O(state=shutdown_check) changes nothing - it reads when the kubelet CA expires (the
    C(auth.openshift.io/certificate-not-after) annotation of the Secret C(kube-apiserver-to-kubelet-signer) in
    C(openshift-kube-apiserver-operator), as OpenShift's "Shutting down the cluster" procedure does) and says whether
    the cluster may stay down O(shutdown_max_days) days (RV(fits)); a cluster restarted after that date cannot recover
    its kubelets' certificates. A missing Secret or annotation counts as not fitting. It also names the nodes not
    Ready now (RV(not_ready)). The task does not fail on a refusal - the caller decides (see RV(refusal)).
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
extends_documentation_fragment:
  - proxshift.openshift.cluster
options:
  state:
    description:
      - V(approved) approves the named nodes' pending CSRs once; V(ready) waits for the nodes to be Ready;
        V(drained) cordons and drains them; V(absent) drains them and deletes their Node objects.
      - V(remediation_plan) changes nothing - it says which of the named nodes are unhealthy and what to do
        with each, with MachineHealthCheck semantics - a node whose C(Ready) condition has been C(False) or
        C(Unknown) for O(unhealthy_timeout) (or whose VM is not running, O(vm_states)) is reset first and
        replaced if it is still unhealthy O(node_startup_timeout) after that reset (O(resets)); only a reset of
        the current episode counts (made after the node's current C(Ready) transition, or whose reboot made that
        transition within O(node_startup_timeout)) - an older one is of a failure the node recovered from; nothing is
        remediated when more than O(max_unhealthy) nodes are unhealthy; at most one control-plane node per
        run, only while the others keep etcd's quorum, and never replaced automatically.
      - A host still joining is not judged - without a Node (or with a Node that has no C(Ready) condition yet)
        within O(node_startup_timeout) of its VM's start (O(vm_uptimes)) or its Node's creation, it is returned in
        RV(starting), neither remediated nor counted as unhealthy (Cluster API's C(nodeStartupTimeout)). A Node that
        reports C(Ready) is judged by that condition.
      - V(cordoned) and V(uncordoned) mark the nodes unschedulable or schedulable; V(shutdown_check) changes nothing and
        says whether the cluster may be shut down for O(shutdown_max_days) days.
    type: str
    required: true
    choices: [approved, ready, drained, absent, remediation_plan, cordoned, uncordoned, shutdown_check]
  nodes:
    description:
      - The node names (as the Node objects and the kubelets' CSRs name them, usually the host's FQDN).
    type: list
    elements: str
    required: true
  addresses:
    description:
      - Per node name, the further SANs its serving certificate may have besides its name and the name's first
        label - its IP addresses (and other host names). A serving CSR with a SAN not listed here is refused.
      - Every key must be one of O(nodes).
    type: dict
    default: {}
  approve_csrs:
    description: With O(state=ready), approve the nodes' CSRs on every look while waiting.
    type: bool
    default: false
  bootstrap_username:
    description: The identity client CSRs of new nodes must be requested by.
    type: str
    default: system:serviceaccount:openshift-machine-config-operator:node-bootstrapper
  bootstrap_groups:
    description: Groups the requestor of a client CSR must all be in.
    type: list
    elements: str
    default: [system:serviceaccounts:openshift-machine-config-operator]
  timeout:
    description: With O(state=ready), seconds to wait for the nodes in all. V(0) looks once.
    type: int
    default: 600
  drain_timeout:
    description: Seconds a drain of one node may take (evictions retried, pods terminating) before it is undone.
    type: int
    default: 300
  skip_wait_for_delete_timeout:
    description:
      - With O(state=drained) and O(state=absent), on a node whose kubelet is unreachable only - seconds after an
        evicted pod's C(deletionTimestamp) from which the drain stops waiting for it (C(kubectl drain
        --skip-wait-for-delete-timeout)). V(0) always waits (until O(drain_timeout)).
    type: int
    default: 1
  poll_interval:
    description: Seconds between two looks (Ready, evictions).
    type: int
    default: 5
  allow_control_plane:
    description: Allow O(state=drained) and O(state=absent) on control-plane nodes.
    type: bool
    default: false
  unhealthy_timeout:
    description:
      - O(state=remediation_plan) - seconds a node's C(Ready) must be C(False) or C(Unknown) before it is unhealthy.
    type: int
    default: 300
  max_unhealthy:
    description:
      - O(state=remediation_plan) - the most unhealthy nodes remediation still acts on, a count (V(2)) or a
        percentage of the named nodes (V(40%), rounded down); above it nothing is remediated.
    type: str
    default: 40%
  vm_states:
    description:
      - O(state=remediation_plan) - each node's VM power state (V(running), V(stopped), ...) by node name; a VM not
        running makes its node unhealthy at once.
    type: dict
    default: {}
  vm_uptimes:
    description:
      - Each node's VM uptime in seconds (C(uptime) of proxshift.proxmox.vm_lifecycle), by node name; every key
        one of O(nodes).
      - With O(state=approved) and O(state=ready) - CSRs created before the VM started are stale (not approved).
      - With O(state=ready) - a C(Ready=True) whose C(lastHeartbeatTime) is from before the VM started is stale (what
        the API still holds from before a shutdown) and is waited past until the booted kubelet reports again.
      - With O(state=remediation_plan) - a host without a Node is judged only O(node_startup_timeout) after its VM
        started.
    type: dict
    default: {}
  rejoin:
    description:
      - The nodes restart after a shutdown (C(playbooks/start.yaml)). A node that exists but whose kubelet has not
        reported C(Ready=True) since its VM started (O(vm_uptimes)) may bootstrap again - its certificates expired
        while the cluster was down - so its node-bootstrapper client CSR is approved, as OpenShift's graceful
        restart documents (the machine-approver leaves it for an administrator). Still one per node, none stale.
      - Without it, a client CSR for a node that already exists is left pending (the machine-approver's
        C(authorizeNodeClientCSR) - the bootstrap identity only joins new nodes).
    type: bool
    default: false
  node_startup_timeout:
    description:
      - O(state=remediation_plan) - seconds a host may take to register a Node that reports C(Ready) (from its VM's
        start, or its Node's creation) before it is judged at all, and seconds a reset node gets to come back before
        it is judged again (then replaced).
    type: int
    default: 600
  resets:
    description: O(state=remediation_plan) - the Unix time (seconds) of each node's last remediation reset, by node name (the cluster's record keeps them).
    type: dict
    default: {}
  control_plane:
    description: O(state=remediation_plan) - names of control-plane nodes, besides those the Node labels say (for a Node that is gone).
    type: list
    elements: str
    default: []
  shutdown_max_days:
    description:
      - O(state=shutdown_check) - the days the cluster is to stay down; the kubelet CA must still be valid after them.
    type: int
    default: 30
attributes:
  check_mode:
    support: full
    description: Reads only; returns what would be approved, cordoned, evicted and deleted. O(state=ready) looks once.
  diff_mode:
    support: full
    description:
      - With O(state=drained) and O(state=absent), per node whether it exists, is cordoned and which pods it runs.
      - With O(state=cordoned) and O(state=uncordoned), per node whether it is unschedulable.
notes:
  - Unlike C(oc adm drain), pods without a controller and pods with C(emptyDir) volumes are evicted too (their data
    is lost); DaemonSet pods stay.
seealso:
  - module: proxshift.openshift.cluster_auth
"""

EXAMPLES = r"""
- name: Approve the new workers' CSRs while they join, and wait for them
  proxshift.openshift.cluster_nodes:
    kubeconfig: "{{ cluster_record.kubeconfig }}"
    state: ready
    approve_csrs: true
    nodes: [worker-3.lab.example.com]
    addresses:
      worker-3.lab.example.com: [192.0.2.13]
    timeout: 1800

- name: Refuse a shutdown the kubelet CA would not outlive
  proxshift.openshift.cluster_nodes:
    kubeconfig: "{{ cluster_record.kubeconfig }}"
    state: shutdown_check
    nodes: [master-0.lab.example.com, worker-0.lab.example.com]
    shutdown_max_days: 14
  register: shutdown

- name: Stop unless it fits
  ansible.builtin.assert:
    that: shutdown.fits
    fail_msg: "{{ shutdown.refusal }}"

- name: Mark every node unschedulable before the shutdown
  proxshift.openshift.cluster_nodes:
    kubeconfig: "{{ cluster_record.kubeconfig }}"
    state: cordoned
    nodes: [master-0.lab.example.com, worker-0.lab.example.com]

- name: Drain a worker and delete its Node
  proxshift.openshift.cluster_nodes:
    kubeconfig: "{{ cluster_record.kubeconfig }}"
    state: absent
    nodes: [worker-3.lab.example.com]
    drain_timeout: 600
"""

RETURN = r"""
approved:
  description: The CSRs approved (in check mode, that would be), each with C(name), C(node) and C(kind) (client or serving).
  returned: always
  type: list
  elements: dict
  sample: [{name: csr-8b2kq, node: worker-3.lab.example.com, kind: client}]
skipped_csrs:
  description:
    - Pending CSRs of named nodes that are not approved - created before the node's VM started, or a client CSR
      for a node that exists already, or has an approved client CSR, or that is not the node's newest - each with
      C(name), C(node), C(kind) and C(reason).
  returned: always
  type: list
  elements: dict
unexpected_csrs:
  description: Pending CSRs that are not for a named node, left alone, each with C(name), C(signer), C(username) and C(reason).
  returned: always
  type: list
  elements: dict
nodes:
  description:
    - Per node. With O(state=ready) - C(name), C(exists), C(ready).
    - With O(state=drained) and O(state=absent) - C(name), C(cordon) (this task cordons it), C(evict) (pods to
      evict), C(evicted), C(left_terminating) (evicted pods on an unreachable node no longer waited for), C(kept) (DaemonSet
      and mirror pods), C(deleted); C(absent) when the node did not exist.
    - With O(state=cordoned) and O(state=uncordoned) - C(name), C(cordoned_before), C(cordoned), C(changed).
  returned: state is ready, drained, absent, cordoned or uncordoned
  type: list
  elements: dict
fits:
  description: O(state=shutdown_check) - whether the kubelet CA outlives a shutdown of O(shutdown_max_days) days.
  returned: state is shutdown_check
  type: bool
refusal:
  description: O(state=shutdown_check) - why the shutdown does not fit (null when it does).
  returned: state is shutdown_check
  type: str
kubelet_signer_not_after:
  description: O(state=shutdown_check) - the kubelet CA's C(auth.openshift.io/certificate-not-after) (null without it).
  returned: state is shutdown_check
  type: str
  sample: "2027-08-05T14:37:50Z"
days_left:
  description: O(state=shutdown_check) - whole days until the kubelet CA expires (null when unknown).
  returned: state is shutdown_check
  type: int
not_ready:
  description: O(state=shutdown_check) - the named nodes that are not Ready now.
  returned: state is shutdown_check
  type: list
  elements: str
reset:
  description: O(state=remediation_plan) - the nodes whose VM to reset now.
  returned: state is remediation_plan
  type: list
  elements: str
replace:
  description: O(state=remediation_plan) - the nodes to replace now (still unhealthy after a reset).
  returned: state is remediation_plan
  type: list
  elements: str
unhealthy:
  description:
    - O(state=remediation_plan) - every unhealthy node with C(name), C(reason), C(action) (reset, replace or null)
      and C(held) (why nothing is done now, or null).
  returned: state is remediation_plan
  type: list
  elements: dict
pending:
  description: O(state=remediation_plan) - nodes not Ready for less than O(unhealthy_timeout) (left alone).
  returned: state is remediation_plan
  type: list
  elements: str
starting:
  description: O(state=remediation_plan) - hosts still joining, within O(node_startup_timeout) (left alone, not counted).
  returned: state is remediation_plan
  type: list
  elements: str
short_circuit:
  description: O(state=remediation_plan) - why nothing is remediated (more unhealthy nodes than O(max_unhealthy)), or null.
  returned: state is remediation_plan
  type: str
refused_csrs:
  description: The CSRs that claim a named node but fail its checks, each with the reason.
  returned: when such a CSR is found (the task fails)
  type: list
  elements: str
  sample:
    - "CSR csr-x (kubernetes.io/kube-apiserver-client-kubelet, for node worker-3): requested by mallory
      (groups system:authenticated), not by the node bootstrapper ..."
blocked:
  description: The pods a drain could not remove within O(drain_timeout), with the PodDisruptionBudgets that block them.
  returned: when a drain times out (the task fails)
  type: list
  elements: str
  sample: ["pod shop/web-0: blocked by PodDisruptionBudget shop/web (disruptionsAllowed 0, currentHealthy 1, desiredHealthy 1)"]
evicted:
  description: The pods evicted before a drain timed out.
  returned: when a drain times out
  type: list
  elements: str
"""
