#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_openshift),
# which plugins/action/acm_import.py runs. The options must match the Rust argument spec of modules/acm_import; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: acm_import
short_description: Import an OpenShift cluster into Red Hat ACM / open-cluster-management
description:
  - Registers a cluster (the spoke) with an ACM or open-cluster-management hub, idempotently.
  - On the hub it ensures, in this order, the cluster namespace, the C(auto-import-secret) (O(mode=auto) only),
    the ManagedCluster (C(hubAcceptsClient=true), labels merged into the existing ones) and the
    KlusterletAddonConfig. Existing objects are updated in place, never deleted and recreated (except the
    C(auto-import-secret) on a re-import, below); the module reports C(changed) only when something was written.
  - A different cluster behind the same name is noticed - the spoke's cluster ID (C(ClusterVersion)
    C(spec.clusterID)) differs from the one the hub knows (the ClusterClaim C(id.openshift.io), or the ID this
    module recorded in the ManagedCluster annotation C(proxshift.io/cluster-id)). The cluster is then imported
    again - the C(auto-import-secret) is deleted and written with the new credentials, and the ManagedCluster gets
    the C(import.open-cluster-management.io/immediate-import) annotation, which hubs that default to the
    C(ImportOnly) strategy (ACM 2.14 and later) need to apply the klusterlet to a cluster that had joined.
    A spoke whose ID cannot be read (unreachable from the controller, not OpenShift) gives a warning.
  - Importing the hub into itself is refused - the spoke's API URL, or its cluster ID, is the hub's.
  - The C(cloud) and C(vendor) labels are set to C(auto-detect) only when missing, so values the hub detected are
    kept (unless O(labels) sets them).
  - O(mode=auto) hands the spoke's credentials to the hub's import controller in C(auto-import-secret), either a
    kubeconfig (O(spoke_kubeconfig)) or a token and API URL (O(spoke_api_key), O(spoke_host)), with
    C(autoImportRetry) (O(auto_import_retry)). Once the cluster is imported - C(ManagedClusterJoined) and
    C(ManagedClusterConditionAvailable) both C(True); C(ManagedClusterImportSucceeded) alone only says the
    klusterlet was deployed - the secret is not written again (the hub deletes it after use and ignores it
    afterwards).
  - O(mode=manual) waits for the hub's C(<cluster>-import) secret to hold C(crds.yaml) and C(import.yaml), then
    applies both to the spoke with server-side apply (C(crds.yaml) first, waiting for each CRD to be
    Established). A cluster that has already joined is left alone (its import manifests rotate on the hub).
  - O(wait=true) waits for C(ManagedClusterJoined) and C(ManagedClusterConditionAvailable) to be C(True).
  - Check mode on a cluster that is not installed yet - O(spoke_kubeconfig) a path to a file that does not exist (the
    install writes it) - reads the hub and predicts the hub's objects from it alone, the C(auto-import-secret) noted as
    created once the install has written the kubeconfig; nothing about the spoke is checked (its cluster ID, the
    self-import refusal) and nothing is awaited.
  - O(state=absent) detaches the cluster - deletes the ManagedCluster, waits for it to go, then deletes the
    cluster namespace (see O(delete_namespace)) and waits for it to go.
  - A cluster namespace that holds objects the import did not create is kept, with a warning naming them (also in
    RV(kept_objects)). Looked at are Secrets, ConfigMaps, Pods, Services, PVCs, Deployments, StatefulSets and,
    where the hub serves them, Hive C(ClusterDeployment), C(AgentClusterInstall), C(InfraEnv) and C(BareMetalHost).
    The import's own are the C(auto-import-secret), the hub's C(<cluster>-import) and C(<cluster>-bootstrap-sa*)
    secrets, service account tokens and pull secrets, the C(kube-root-ca.crt) and C(openshift-service-ca.crt)
    config maps, objects owned by another object, and objects with an C(*open-cluster-management.io/*) label or
    annotation.
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
options:
  state:
    description: V(present) imports or updates; V(absent) detaches.
    type: str
    choices: [present, absent]
    default: present
  cluster_name:
    description:
      - Name of the ManagedCluster and of its namespace on the hub (a DNS label - lowercase letters, digits, C(-)).
    type: str
    required: true
    aliases: [name]
  mode:
    description:
      - V(auto) lets the hub import the cluster with the credentials in C(auto-import-secret).
      - V(manual) applies the hub's import manifests to the spoke from here (for hubs that cannot reach the
        spoke's API).
      - Both need spoke connection options.
    type: str
    choices: [auto, manual]
    default: auto
  labels:
    description:
      - Labels for the ManagedCluster, merged into the existing ones (labels are never removed). Values must be
        strings.
      - C(name=<cluster_name>) is always set; C(cloud) and C(vendor) default to C(auto-detect) when missing.
    type: dict
    default: {}
  clusterset:
    description:
      - ManagedClusterSet to join (label C(cluster.open-cluster-management.io/clusterset)); needs the
        C(managedclustersets/join) permission on the hub. An empty string sets no clusterset label.
      - The module warns when the set does not exist on the hub (the cluster then belongs to no set).
    type: str
    default: default
  klusterlet_addon_config:
    description:
      - Ensure the KlusterletAddonConfig (ACM only). Set V(false) on a multicluster-engine-only hub, which has
        no such CRD.
    type: bool
    default: true
  addons:
    description:
      - Per-cluster add-ons in the KlusterletAddonConfig. Each switch defaults to V(true), except
        O(addons.iam_policy_controller), which is left out unless set.
    type: dict
    suboptions:
      application_manager:
        description: Application manager add-on (C(spec.applicationManager.enabled)); V(true) when not set.
        type: bool
      policy_controller:
        description: Governance policy controller (C(spec.policyController.enabled)); V(true) when not set.
        type: bool
      search_collector:
        description: Search collector (C(spec.searchCollector.enabled)); V(true) when not set.
        type: bool
      cert_policy_controller:
        description: Certificate policy controller (C(spec.certPolicyController.enabled)); V(true) when not set.
        type: bool
      iam_policy_controller:
        description: IAM policy controller (C(spec.iamPolicyController.enabled)); omitted when not set.
        type: bool
  keep_auto_import_secret:
    description:
      - Annotate the C(auto-import-secret) so the hub keeps it after the import (for re-imports).
    type: bool
    default: false
  auto_import_retry:
    description:
      - O(mode=auto) - C(autoImportRetry) of the C(auto-import-secret) - how many times the hub's import controller
        retries the import with it (V(0) - one try). Set when the secret is written; the hub counts an existing
        secret's value down as it retries, so that value is left alone.
      - Between V(0) and V(65535).
    type: int
    default: 5
  force_conflicts:
    description:
      - O(mode=manual) - take over fields on the spoke that another field manager owns (server-side apply
        C(force)). Without it such a clash fails with the field and the other manager named.
    type: bool
    default: false
  delete_namespace:
    description:
      - O(state=absent) - also delete the cluster namespace on the hub (the hub normally removes it itself) and
        wait for it to go. With V(false) the module only waits for a namespace that is already being deleted.
    type: bool
    default: true
  wait:
    description: Wait until the cluster has joined and is available (O(state=present)).
    type: bool
    default: false
  wait_timeout:
    description:
      - Seconds for each wait - the C(<cluster>-import) secret (O(mode=manual)), joining (O(wait=true)), and the
        deletions (O(state=absent), all together). V(0) looks once.
    type: int
    default: 600
  poll_interval:
    description: Seconds between two looks while waiting.
    type: int
    default: 10
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
  spoke_kubeconfig:
    description:
      - Kubeconfig of the cluster being imported, as a path or as text (the installer's C(auth/kubeconfig)).
      - O(mode=auto) - stored in C(auto-import-secret) as C(kubeconfig); it must have cluster-admin rights.
      - O(mode=manual) - used to apply the import manifests.
    type: str
  spoke_context:
    description: Context in O(spoke_kubeconfig).
    type: str
  spoke_host:
    description:
      - API URL of the cluster being imported.
      - O(mode=auto) without O(spoke_kubeconfig) - stored in C(auto-import-secret) as C(server), with
        O(spoke_api_key) as C(token); the hub then connects without checking the spoke's certificate.
    type: str
  spoke_api_key:
    description: Bearer token (cluster-admin) of the cluster being imported; see O(spoke_host).
    type: str
  spoke_ca_cert:
    description: O(mode=manual) - PEM file with the CA certificate(s) of the spoke's API.
    type: path
  spoke_validate_certs:
    description: O(mode=manual) - check the spoke's certificate.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reads the hub (and the spoke), reports what would be created, updated or deleted, writes nothing.
  diff_mode:
    support: full
    description: One before/after pair per object that changes, limited to the fields the module manages; Secret
      data is shown as C(<hidden>).
notes:
  - The spoke's cluster ID is read with one GET of C(clusterversions/version) on the spoke (and, when known, the
    hub's own for the self-import check).
  - Without a hub controller nothing happens after the objects are written; O(wait=true) then times out and
    lists the conditions still missing.
seealso:
  - module: proxshift.openshift.cluster_auth
"""

EXAMPLES = r"""
- name: Log in to the new cluster
  proxshift.openshift.cluster_auth:
    kubeconfig: "{{ install_dir }}/auth/kubeconfig"
    wait_for: [api, clusterversion]
  register: spoke

- name: Import it into the ACM hub and wait until it has joined
  proxshift.openshift.acm_import:
    cluster_name: sno1
    hub_kubeconfig: ~/.kube/hub.kubeconfig
    spoke_kubeconfig: "{{ install_dir }}/auth/kubeconfig"
    clusterset: lab
    labels:
      env: lab
      apply-gitops: "true"
    addons:
      search_collector: false
    wait: true
    wait_timeout: 900

- name: Auto-import with a token instead of a kubeconfig
  proxshift.openshift.acm_import:
    cluster_name: sno2
    hub_host: https://api.hub.example.com:6443
    hub_api_key: "{{ hub_token }}"
    hub_ca_cert: /etc/pki/hub-ca.pem
    spoke_host: https://api.sno2.example.com:6443
    spoke_api_key: "{{ sno2_token }}"

- name: Manual import (the hub cannot reach the cluster's API)
  proxshift.openshift.acm_import:
    cluster_name: edge1
    mode: manual
    hub_kubeconfig: ~/.kube/hub.kubeconfig
    spoke_kubeconfig: "{{ install_dir }}/auth/kubeconfig"
    klusterlet_addon_config: false
    wait: true

- name: Detach a cluster from the hub
  proxshift.openshift.acm_import:
    cluster_name: sno1
    state: absent
    hub_kubeconfig: ~/.kube/hub.kubeconfig
    wait_timeout: 300
"""

RETURN = r"""
msg:
  description: What happened.
  returned: always
  type: str
  sample: sno1 imported or updated on the hub (auto mode)
cluster_name:
  description: The cluster's name on the hub.
  returned: success
  type: str
  sample: sno1
mode:
  description: The import mode used.
  returned: state is present
  type: str
  sample: auto
actions:
  description: One entry per object looked at - C(side) (hub or spoke), C(object) (kind and name) and C(action)
    (created, updated, unchanged, deleted, re-imported, or skipped with the reason). Also returned on failure, for what was
    done before it.
  returned: always
  type: list
  elements: dict
  sample: [{"side": "hub", "object": "ManagedCluster sno1", "action": "updated"}]
spoke_cluster_id:
  description: The spoke's OpenShift cluster ID (C(ClusterVersion) C(spec.clusterID)); null when it could not be
    read (see RV(spoke_cluster_id_error)) or the spoke is not OpenShift.
  returned: state is present
  type: str
  sample: 6c1f5a2e-0000-4000-8000-0000000000f1
spoke_cluster_id_error:
  description: Why the spoke's cluster ID could not be read (for example the controller cannot reach the spoke, or in
    check mode the cluster is not installed yet); a different cluster behind the same name then goes unnoticed. Null
    when it was read.
  returned: state is present
  type: str
spoke_objects:
  description: O(mode=manual) - the objects from C(crds.yaml) and C(import.yaml) applied to the spoke, with
    C(object), C(action) and C(from).
  returned: state is present
  type: list
  elements: dict
  sample: [{"object": "Klusterlet klusterlet", "action": "created", "from": "import.yaml"}]
labels:
  description: The ManagedCluster's labels after the run.
  returned: state is present
  type: dict
  sample: {"name": "sno1", "cloud": "Other", "vendor": "OpenShift", "env": "lab"}
conditions:
  description: The ManagedCluster's status conditions (C(type), C(status), C(reason), C(message)), also on a wait
    timeout.
  returned: state is present, or a join wait timed out
  type: list
  elements: dict
  sample: [{"type": "ManagedClusterJoined", "status": "True", "reason": "ManagedClusterJoined", "message": "Managed cluster joined"}]
joined:
  description: Whether C(ManagedClusterJoined) is C(True).
  returned: state is present
  type: bool
available:
  description: Whether C(ManagedClusterConditionAvailable) is C(True).
  returned: state is present
  type: bool
kept_objects:
  description: O(state=absent) - the objects (C(Kind namespace/name)) the import did not create that kept the cluster
    namespace from being deleted; empty when it was deleted or not looked at.
  returned: state is absent
  type: list
  elements: str
  sample: ["Secret sno1/bmc-credentials"]
"""
