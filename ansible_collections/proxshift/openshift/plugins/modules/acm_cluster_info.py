#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_openshift),
# which plugins/action/acm_cluster_info.py runs. The options must match the Rust argument spec of modules/acm_cluster_info; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: acm_cluster_info
short_description: List the ManagedClusters of a Red Hat ACM / open-cluster-management hub
description:
  - Reads one ManagedCluster by O(name), or every ManagedCluster (optionally matching O(label_selector)), and
    returns each with its labels, conditions, cluster claims and whether the hub accepted it and it joined and
    is available.
  - Only reads; it never changes anything, so it runs the same in check mode. Use it to check an import done by
    M(proxshift.openshift.acm_import).
  - The hub connection options are those of M(proxshift.openshift.acm_import), so one C(module_defaults) entry
    for C(group/proxshift.openshift.openshift) serves both. A token read from the kubeconfig is masked in all output.
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
options:
  name:
    description: The ManagedCluster to read. A missing one gives an empty RV(clusters), not a failure.
    type: str
    aliases: [cluster_name]
  label_selector:
    description: Only ManagedClusters whose labels match, for example C(cloud=Other,vendor=OpenShift).
    type: str
  hub_kubeconfig:
    description:
      - Kubeconfig of the hub, as a path or as the kubeconfig text. Either this or O(hub_host) is required.
      - Falls back to the E(K8S_AUTH_KUBECONFIG) environment variable.
    type: str
  hub_context:
    description:
      - Context in O(hub_kubeconfig); default is its C(current-context).
      - Falls back to the E(K8S_AUTH_CONTEXT) environment variable.
    type: str
  hub_host:
    description:
      - API URL of the hub, for example C(https://api.hub.example.com:6443); overrides the kubeconfig's server.
      - Falls back to the E(K8S_AUTH_HOST) environment variable, so the host and token of an AWX/AAP
        "OpenShift or Kubernetes API Bearer Token" credential are enough.
    type: str
  hub_api_key:
    description:
      - Bearer token for the hub (for example from M(proxshift.openshift.cluster_auth)).
      - Falls back to the E(K8S_AUTH_API_KEY) environment variable.
    type: str
  hub_ca_cert:
    description:
      - PEM file with the CA certificate(s) of the hub's API.
      - Falls back to the E(K8S_AUTH_SSL_CA_CERT) environment variable.
    type: path
  hub_validate_certs:
    description:
      - Check the hub's certificate. V(false) is for labs only and triggers a warning.
      - Falls back to the E(K8S_AUTH_VERIFY_SSL) environment variable.
    type: bool
    default: true
notes:
  - The user needs C(get) and C(list) on C(managedclusters.cluster.open-cluster-management.io).
attributes:
  check_mode:
    support: full
    description: The module only reads; check mode runs the same GET requests and returns the same answer.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
"""

EXAMPLES = r"""
- name: Is the cluster sno imported?
  proxshift.openshift.acm_cluster_info:
    hub_kubeconfig: ~/.kube/hub.kubeconfig
    name: sno
  register: sno

- name: Every OpenShift ManagedCluster of the hub
  proxshift.openshift.acm_cluster_info:
    hub_host: https://api.hub.example.com:6443
    hub_api_key: "{{ hub_token }}"
    label_selector: vendor=OpenShift
  register: managed
"""

RETURN = r"""
msg:
  description: How many ManagedClusters were found.
  returned: always
  type: str
clusters:
  description: The ManagedClusters found.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The ManagedCluster's name.
      type: str
    labels:
      description: Its labels.
      type: dict
    hub_accepts_client:
      description: C(spec.hubAcceptsClient).
      type: bool
    accepted:
      description: Condition C(HubAcceptedManagedCluster) is C(True).
      type: bool
    joined:
      description: Condition C(ManagedClusterJoined) is C(True).
      type: bool
    available:
      description: Condition C(ManagedClusterConditionAvailable) is C(True).
      type: bool
    conditions:
      description: Every condition with C(type), C(status), C(reason) and C(message).
      type: list
      elements: dict
    version:
      description: The managed cluster's Kubernetes version, when reported.
      type: str
    cluster_claims:
      description: The cluster claims (C(id.openshift.io), C(version.openshift.io), ...) as a name to value map.
      type: dict
"""
