#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_openshift),
# which plugins/action/cluster_auth.py runs. The options must match the Rust argument spec of modules/cluster_auth; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_auth
short_description: Log in to an OpenShift cluster and wait for it to be ready
description:
  - Obtains credentials for an OpenShift (or plain Kubernetes) API server and checks them, from a kubeconfig,
    an API token (O(api_key)), or a username and password (kubeadmin) through OpenShift's OAuth server.
  - Password login follows C(oc login) - it reads C(/.well-known/oauth-authorization-server) from the API,
    asks the authorization endpoint for a token with the C(openshift-challenging-client) client, answering
    the Basic challenge with an C(X-CSRF-Token) header, and reads the token from the fragment of the 302
    redirect. The authorization endpoint is the C(oauth-openshift.apps...) route, served with the ingress
    certificate, not the API's - its CA must be in the O(kubeconfig)'s CA bundle, in O(ca_cert), or given as
    O(ingress_ca).
  - With O(wait_for) it polls the API C(/readyz), the ClusterVersion, the ClusterOperators, the
    MachineConfigPools and the Nodes until all named targets are ready - with the ClusterOperators stable for
    O(stable_polls) looks in a row, as C(oc adm wait-for-stable-cluster) wants - or O(timeout) passes; on a
    timeout it fails and lists what was still pending (which operators, pools and nodes, and why).
  - O(state=absent) revokes an OAuth token (deletes its C(useroauthaccesstokens) object, falling back to
    C(oauthaccesstokens) on clusters without it).
  - A token obtained by password login or read from the kubeconfig is returned in RV(api_key) and RV(k8s_auth)
    so later tasks can use it; set C(no_log) on the task. When the module fails, the token is masked in all
    output. O(password), O(api_key) and O(kubeconfig) (which may hold credentials) are never shown.
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
extends_documentation_fragment:
  - proxshift.openshift.cluster
options:
  state:
    description:
      - V(present) obtains and checks credentials (and waits when O(wait_for) is set).
      - V(absent) revokes the OAuth token given as O(api_key) or found in the O(kubeconfig).
    type: str
    choices: [present, absent]
    default: present
  api_url:
    description:
      - The API URL, for example C(https://api.sno.example.com:6443).
      - Required with O(password). Overrides the server of the O(kubeconfig).
      - Falls back to the E(K8S_AUTH_HOST) environment variable, but only for a login whose credentials also come
        from the environment (AWX's bearer-token credential sets both, usually for the ACM hub). When the task itself
        gives O(username)/O(password) or O(api_key) and no O(api_url), the module fails naming E(K8S_AUTH_HOST) instead
        of logging in there; when the task gives its own O(kubeconfig), the kubeconfig's server is used (a warning
        says E(K8S_AUTH_HOST) was not).
    type: str
    aliases: [host]
  kubeconfig:
    description:
      - A kubeconfig, as a path or as the kubeconfig text itself (for example the installer's C(auth/kubeconfig)).
      - Supports C(certificate-authority(-data)), C(client-certificate(-data)), C(client-key(-data)), C(token),
        C(token-file) and C(insecure-skip-tls-verify). Exec and auth-provider plugins are not supported.
      - Falls back to the E(K8S_AUTH_KUBECONFIG) environment variable.
      - With O(password), only its server (unless O(api_url) is set) and its CA bundle are used, not its user's
        credentials. All certificates of the bundle are trusted, so a kubeconfig holding the API and the ingress
        (router) CA serves the password login too.
    type: str
  username:
    description:
      - The user for password login. Defaults to C(kubeadmin) when O(password) is given.
      - Falls back to the E(K8S_AUTH_USERNAME) environment variable.
    type: str
  password:
    description:
      - Password for O(username), used to obtain an OAuth token. Needs O(api_url) or a O(kubeconfig) (for its
        server and CA).
      - The OAuth server runs on the C(*.apps) ingress; its certificate is checked with the API's CAs (O(ca_cert)
        or the O(kubeconfig)'s) plus O(ingress_ca).
      - Falls back to the E(K8S_AUTH_PASSWORD) environment variable.
    type: str
  api_key:
    description:
      - A bearer token for the API. Overrides a token or client certificate of the O(kubeconfig).
      - With O(state=absent), the OAuth token to revoke.
      - Falls back to the E(K8S_AUTH_API_KEY) environment variable.
    type: str
  ca_cert:
    description:
      - PEM file with the CA certificate(s) to trust for the API (and the OAuth server), in addition to the system
        store. Overrides the kubeconfig's CA.
      - Falls back to the E(K8S_AUTH_SSL_CA_CERT) environment variable.
    type: path
    aliases: [ssl_ca_cert]
  ingress_ca:
    description:
      - The CA certificate(s) of the ingress that serves the OAuth route (C(oauth-openshift.apps...)), as a PEM
        file path or the PEM text; trusted for the OAuth server in addition to the API's CAs.
      - For example the C(ca-bundle.crt) of the C(default-ingress-cert) ConfigMap in C(openshift-config-managed).
      - Used only with O(password).
    type: str
  validate_certs:
    description:
      - Check the server certificates. V(false) is for labs only and triggers a warning.
      - Setting it to V(false) also overrides the kubeconfig's setting; V(true) keeps the kubeconfig's
        C(insecure-skip-tls-verify).
      - Falls back to the E(K8S_AUTH_VERIFY_SSL) environment variable.
    type: bool
    default: true
    aliases: [verify_ssl]
  wait_for:
    description:
      - What must be ready before the module returns.
      - V(api) - C(GET /readyz) answers C(ok). This is waited for first and anonymously (C(/readyz) is public), so
        the module can be started while the API is still coming up; the login and the other targets follow.
      - V(clusterversion) - ClusterVersion C(version) is C(Available=True), C(Progressing=False) and
        C(Failing=False), and with O(version) at that version (the desired version, and the newest history entry
        C(Completed)); the version is returned in RV(version).
      - V(operators) - every ClusterOperator is C(Available=True), C(Progressing=False) and C(Degraded=False) (a
        condition not reported counts as unmet), as C(oc adm wait-for-stable-cluster) checks them, and all
        targets have been ready in O(stable_polls) looks in a row.
      - V(machineconfigpools) - every MachineConfigPool is C(Updated=True) and C(Degraded=False), with
        C(updatedMachineCount) equal to C(machineCount).
      - V(nodes) - every Node is C(Ready=True), and at least O(expected_nodes) exist when that is set.
      - Connection errors, 5xx answers and missing objects count as pending (the cluster may still be coming up);
        401 and 403 fail at once.
    type: list
    elements: str
    choices: [api, clusterversion, operators, machineconfigpools, nodes]
    default: []
  timeout:
    description: Seconds to wait for O(wait_for) in all. V(0) looks once.
    type: int
    default: 1800
  poll_interval:
    description: Seconds between two looks.
    type: int
    default: 10
  expected_nodes:
    description: With O(wait_for=nodes), the number of nodes that must exist (all of them Ready).
    type: int
  version:
    description:
      - With O(wait_for=clusterversion), the OpenShift version the cluster must be at, for example C(4.19.3),
        or a minor such as C(4.19) that any C(4.19.z) meets.
    type: str
  stable_polls:
    description:
      - With O(wait_for=operators), how many looks in a row (O(poll_interval) apart) everything must be ready
        before the module returns; one look that is not starts the count again. V(1) returns at the first ready look.
      - The default, 31 looks 10 seconds apart, is the 5 minutes C(oc adm wait-for-stable-cluster) waits by default.
      - O(timeout) must be longer than (O(stable_polls) - 1) x O(poll_interval).
    type: int
    default: 31
attributes:
  check_mode:
    support: full
    description: Login and readiness checks are read-only and run in check mode too; a revocation is only reported.
  diff_mode:
    support: none
    description: Nothing to diff.
notes:
  - A password login creates an OAuth access token on the cluster (valid 24 hours by default); revoke it with
    O(state=absent) when done. The module reports C(changed=false) for logins, like C(oc login).
seealso:
  - module: proxshift.openshift.acm_import
"""

EXAMPLES = r"""
- name: Log in as kubeadmin and wait until the cluster is fully up
  proxshift.openshift.cluster_auth:
    api_url: https://api.sno.example.com:6443
    username: kubeadmin
    password: "{{ lookup('file', 'auth/kubeadmin-password') | trim }}"
    ca_cert: /etc/pki/sno-ca-bundle.pem
    wait_for: [api, clusterversion, operators, machineconfigpools, nodes]
    expected_nodes: 3
    version: 4.19.3
    timeout: 3600
  register: ocp_auth
  no_log: true

- name: Log in as kubeadmin, trusting the CAs of the installer's kubeconfig and the ingress CA
  proxshift.openshift.cluster_auth:
    kubeconfig: "{{ install_dir }}/auth/kubeconfig"
    password: "{{ lookup('file', install_dir ~ '/auth/kubeadmin-password') | trim }}"
    ingress_ca: /etc/pki/sno-ingress-ca.pem
  register: ocp_auth
  no_log: true

- name: Use the installer's kubeconfig and only wait for the API
  proxshift.openshift.cluster_auth:
    kubeconfig: "{{ install_dir }}/auth/kubeconfig"
    wait_for: [api]
    timeout: 600
    poll_interval: 5

- name: Check a token
  proxshift.openshift.cluster_auth:
    api_url: https://api.sno.example.com:6443
    api_key: "{{ ocp_token }}"
    validate_certs: true

- name: Revoke the token obtained above
  proxshift.openshift.cluster_auth:
    state: absent
    api_url: "{{ ocp_auth.host }}"
    api_key: "{{ ocp_auth.api_key }}"
    ca_cert: /etc/pki/sno-ca-bundle.pem
"""

RETURN = r"""
msg:
  description: What happened.
  returned: always
  type: str
  sample: https://api.sno.example.com:6443 is ready (api, clusterversion, operators, nodes)
host:
  description: The API URL used.
  returned: always
  type: str
  sample: https://api.sno.example.com:6443
api_key:
  description: The bearer token in use (obtained by password login, given, or from the kubeconfig); null for client certificates.
  returned: state is present
  type: str
ca_cert:
  description: The CA file used, when the CA came from a file (O(ca_cert) or the kubeconfig's C(certificate-authority)).
  returned: state is present
  type: str
validate_certs:
  description: Whether server certificates were checked.
  returned: state is present
  type: bool
username:
  description: The user the server reports (OpenShift C(users/~), e.g. C(kube:admin)), else the login or kubeconfig user name.
  returned: state is present
  type: str
  sample: kube:admin
auth_method:
  description: How the module authenticated.
  returned: state is present
  type: str
  sample: password
token_expires_in:
  description: Lifetime of a token obtained by password login, in seconds.
  returned: state is present and a password login happened
  type: int
  sample: 86400
token_expiry:
  description: When that token expires (RFC 3339, UTC).
  returned: state is present and a password login happened
  type: str
  sample: "2026-12-03T13:20:38Z"
k8s_auth:
  description: host, api_key, ca_cert, validate_certs and username as one dictionary (handy for C(module_defaults)).
  returned: state is present
  type: dict
version:
  description: The cluster version from the ClusterVersion (C(status.desired.version)).
  returned: wait_for contains clusterversion
  type: str
  sample: 4.19.3
cluster_id:
  description: The cluster's ID (ClusterVersion C(spec.clusterID)), the installer's ClusterID; null until the ClusterVersion exists.
  returned: wait_for contains clusterversion
  type: str
  sample: 6c1f5a2e-3b7d-4e0a-9f21-5d8c4b2a1e90
readiness:
  description: The last look at each O(wait_for) target - C(ready), C(pending), and per target C(version) and
    C(history_state) (clusterversion), C(total), C(not_ready), C(stable_polls) (ready looks in a row) and
    C(polls) (looks in all) (operators), C(total) and C(not_ready) (machineconfigpools), C(total), C(ready_count)
    and C(not_ready) (nodes).
  returned: wait_for is set
  type: dict
  sample:
    operators:
      ready: false
      pending: ["operator ingress: Degraded=False (now True, IngressDegraded: router pods crash)"]
      total: 33
      not_ready: [ingress]
      stable_polls: 0
      polls: 12
pending:
  description: What was still not ready when the timeout passed, one item per problem.
  returned: on a wait timeout
  type: list
  elements: str
  sample: ["node worker-2: Ready=True (now False, KubeletNotReady: container runtime is down)"]
revoked:
  description: Whether a token was revoked (false in check mode and when it was already invalid).
  returned: state is absent
  type: bool
"""
