#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_openshift),
# which plugins/action/cluster_config.py runs. The options must match the Rust argument spec of modules/cluster_config; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_config
short_description: Apply, delete, read and wait for Kubernetes objects with server-side apply
description:
  - Applies a list of Kubernetes objects (O(objects), and/or the YAML documents of O(definition)) to a
    cluster's API with server-side apply as O(field_manager), in the order given; deletes them with
    O(state=absent) (in reverse order); or reads them with O(state=read).
  - Idempotent. Every object is first applied with C(dryRun=All); the server answers with what it would
    store (validation, defaulting and the other field managers' fields included) and stores nothing. Only
    when that differs from the object as it is (C(managedFields), C(resourceVersion), C(generation) and
    C(status), the controllers' side, left out of the comparison) is the real apply sent, and only then is C(changed) true. A converged
    object costs a GET and a dry-run PATCH, no write.
  - In check mode nothing is stored; the answer of the server's dry run is the result and the diff, so
    what check mode reports is validated and defaulted by the server itself. An object in a namespace
    that the same task would create cannot be dry-run; it is reported as created with a RV(results[].note).
  - >-
    On a cluster that does not have yet what an operator or an earlier step brings, check mode cannot dry-run
    objects of a kind not served yet (its CRD comes with the operator) or in a namespace not there yet. With
    O(installed_by) naming what brings them, such objects are predicted instead of failing - created
    (C(changed)), or not found when read - with a RV(results[].note) such as C(would create (kind not served
    yet: installed by the External Secrets Operator)), also appended to RV(msg). Without O(installed_by) a kind
    that is not served fails check mode as it fails a real run (a mistyped kind is never hidden).
  - Secret C(data) and C(stringData) values (and kubectl's last-applied annotation of a Secret) never appear
    in the result or the diff; every such value of the task is also masked in all output.
  - O(wait) checks conditions and values of the applied objects until all hold or O(wait_timeout) passes;
    on timeout the task fails and each object's result lists what it still lacks, with its last condition.
  - The connection options are those of M(proxshift.openshift.cluster_auth) (C(host) is an alias of O(api_url)),
    with the same E(K8S_AUTH_*) environment fallbacks.
  - Certificate keeping (O(state=backup), O(state=restore), O(state=report)) works on the TLS Secrets listed in
    O(certificates). V(backup) reads them and returns RV(backup), the copy a record keeps (no server-managed
    metadata); it changes nothing. V(restore) puts the copies of O(certificates_backup) back with server-side
    apply (a Secret with no copy there is used as the cluster has it) and wires them in - the V(ingress) one as
    C(IngressController/default) C(spec.defaultCertificate), each V(api) one as an entry of C(APIServer/cluster)
    C(spec.servingCerts.namedCertificates) for its O(certificates[].hostname) (other entries are kept). Before
    anything is written every kept certificate must exist, its key must belong to it and it must cover its
    hostname; otherwise nothing is written and the failure names each Secret and what is wrong. V(report) only
    reads. All three return RV(certificates) (subjects, SANs, serial, expiry, warnings) and warn about a
    certificate expiring within O(certificate_warning_days) or not covering its hostname.
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
extends_documentation_fragment:
  - proxshift.openshift.cluster
options:
  objects:
    description:
      - The objects, each with C(apiVersion), C(kind) and C(metadata.name) (with O(state=read) the name may be
        left out to list every object of the kind). C(status) is never applied.
    type: list
    elements: dict
    default: []
  definition:
    description:
      - YAML text with one or more documents (C(List) kinds are flattened), one object as a mapping, or a list of
        objects (nested lists flattened) - what M(kubernetes.core.k8s) takes; applied after O(objects).
    type: raw
    aliases: [resource_definition]
  src:
    description:
      - Path of a YAML file with one or more documents, read where the module runs (the controller with
        a local connection); taken as O(definition) would be. Not with O(definition).
    type: path
  apply:
    description:
      - Accepted so that a M(kubernetes.core.k8s) task ports unchanged; every write of this module is a server-side
        apply (field manager O(field_manager)) whatever its value, which keeps the fields other managers set.
    type: bool
  state:
    description:
      - V(present) applies, V(absent) deletes (C(changed) only for objects that existed), V(read) only reads.
      - V(backup), V(restore) and V(report) keep the certificates of O(certificates) (see the description);
        O(objects), O(definition) and O(src) are not used with them.
    type: str
    choices: [present, absent, read, backup, restore, report]
    default: present
  namespace:
    description: Namespace of namespaced objects that name none (else C(default)). Ignored for cluster-scoped kinds.
    type: str
  field_manager:
    description: The server-side apply field manager.
    type: str
    default: proxshift
  force_conflicts:
    description:
      - Take over fields that other field managers own. Without it such a clash fails, naming the fields and
        their manager.
    type: bool
    default: false
  installed_by:
    description:
      - What installs the kinds, or creates the namespaces, of these objects that the cluster may not have yet
        (an operator, an earlier step), named in the check-mode prediction. Used only in check mode; see the
        description. A real run always needs the kind served and the namespace there.
    type: str
  wait:
    description:
      - A list of checks every applied object (or those of C(kind) / C(name)) must pass, polled every
        O(wait_interval) seconds. Each check is a mapping with C(type) (a condition type in C(status.conditions))
        and C(status) (its wanted status, default C(True)), or with C(path) (a JSONPath-like path such as
        C(status.phase), C(.status.conditions[0].type) or C({.status.phase})) and C(value) (the wanted value,
        compared as text; unset means the path only has to be set); C(kind) and C(name) narrow it to those objects.
      - Or a boolean, as M(kubernetes.core.k8s) takes it - V(true) waits for O(wait_condition) when given, else for
        each object's readiness as kubernetes.core's waiter judges it (a Deployment's or StatefulSet's replicas
        updated and ready at its newest generation, a DaemonSet's pods, a Pod's containers; other kinds only
        have to exist); V(false) does not wait.
      - Only with O(state=present); skipped in check mode.
    type: raw
    default: []
  wait_condition:
    description:
      - With O(wait=true), the condition each object must show (M(kubernetes.core.k8s)'s O(wait_condition)); without
        it, a warning and no wait.
    type: dict
    suboptions:
      type:
        description: The condition type in C(status.conditions).
        type: str
        required: true
      status:
        description: Its wanted status.
        type: str
        choices: ["True", "False", "Unknown"]
        default: "True"
      reason:
        description: Its wanted reason, when given.
        type: str
  wait_timeout:
    description: Seconds to wait for O(wait).
    type: int
    default: 120
  wait_interval:
    description: Seconds between two looks.
    type: int
    default: 2
    aliases: [wait_sleep]
  certificates:
    description:
      - The TLS Secrets (C(tls.crt), C(tls.key)) kept across reinstalls, for O(state=backup), O(state=restore) and
        O(state=report).
    type: list
    elements: dict
    default: []
    suboptions:
      namespace:
        description: The Secret's namespace; C(openshift-ingress) for V(ingress), C(openshift-config) for V(api).
        type: str
        required: true
      name:
        description: The Secret's name.
        type: str
        required: true
      type:
        description:
          - V(ingress) is the default certificate of the default IngressController (one at most), V(api) a named
            certificate of the API server, V(other) is only kept.
        type: str
        choices: [ingress, api, other]
        default: other
      hostname:
        description:
          - The name the certificate is served for, which it must cover; required for V(ingress)
            (C(*.apps.CLUSTER.DOMAIN)) and V(api) (C(api.CLUSTER.DOMAIN)), optional for V(other).
        type: str
  certificates_backup:
    description:
      - With O(state=restore) (or O(state=report)), the RV(backup) an earlier O(state=backup) returned, as the
        record keeps it. The Secrets' values (base64 and decoded) are masked in all output, a failure
        before any check or connection included.
    type: dict
    default: {}
  certificate_warning_days:
    description: Warn about a kept certificate that expires within this many days.
    type: int
    default: 30
notes:
  - The user needs C(get) and C(patch) on the objects' resources (C(delete) for O(state=absent), C(list) for
    a read without a name). Discovery (C(/api), C(/apis/GROUP/VERSION)) finds each kind's resource.
  - RV(backup) holds the Secrets' values (it is what the record stores), so register it in a task with C(no_log).
    Keys are checked for RSA (PKCS#1, PKCS#8), ECDSA P-256/P-384 (PKCS#8, SEC1) and Ed25519; an encrypted key
    is refused.
attributes:
  check_mode:
    support: full
    description: Server-side dry run (C(dryRun=All)) of every apply and delete; nothing is stored. Waits are skipped.
  diff_mode:
    support: full
    description: One before/after pair per changed object, as the server has and would store it, Secret values hidden.
"""

EXAMPLES = r"""
- name: A namespace and a config map in it
  proxshift.openshift.cluster_config:
    kubeconfig: "{{ cluster_dir }}/auth/kubeconfig"
    objects:
      - apiVersion: v1
        kind: Namespace
        metadata: {name: demo}
      - apiVersion: v1
        kind: ConfigMap
        metadata: {name: settings, namespace: demo}
        data: {mode: lab}

- name: Run a job and wait for it to complete
  proxshift.openshift.cluster_config:
    host: https://api.sno.example.com:6443
    api_key: "{{ token }}"
    definition: "{{ lookup('ansible.builtin.file', 'job.yaml') }}"
    wait:
      - {type: Complete}
      - {path: status.succeeded, value: "1", kind: Job}
    wait_timeout: 600

- name: A kubernetes.core.k8s task ported by its module name alone (K8S_AUTH_* from the environment)
  proxshift.openshift.cluster_config:
    state: present
    apply: true
    src: manifests/web.yaml
    wait: true
    wait_condition: {type: Available, status: "True"}
    wait_sleep: 5
    wait_timeout: 300

- name: The storage classes
  proxshift.openshift.cluster_config:
    state: read
    objects:
      - {apiVersion: storage.k8s.io/v1, kind: StorageClass}
  register: classes

- name: Remove the namespace
  proxshift.openshift.cluster_config:
    state: absent
    objects:
      - {apiVersion: v1, kind: Namespace, metadata: {name: demo}}

- name: Back up the kept certificates (the values go to the record, never to the log)
  proxshift.openshift.cluster_config:
    state: backup
    certificates:
      - {namespace: openshift-ingress, name: apps-cert, type: ingress, hostname: "*.apps.lab.example.com"}
      - {namespace: openshift-config, name: api-cert, type: api, hostname: api.lab.example.com}
  register: kept
  no_log: true

- name: Put them back after a reinstall and wire them in
  proxshift.openshift.cluster_config:
    state: restore
    certificates:
      - {namespace: openshift-ingress, name: apps-cert, type: ingress, hostname: "*.apps.lab.example.com"}
      - {namespace: openshift-config, name: api-cert, type: api, hostname: api.lab.example.com}
    certificates_backup: "{{ kept.backup }}"
"""

RETURN = r"""
msg:
  description: How many objects were created, updated, unchanged, deleted, absent or read.
  returned: always
  type: str
conflict:
  description:
    - The failure is the API server's 409 Conflict - the object changed since it was read (an object given with its
      C(metadata.resourceVersion) is applied only over that version), or other field managers own the fields. A caller
      that read the object first re-reads it and tries again.
  returned: failure
  type: bool
backup:
  description:
    - With O(state=backup), the kept Secrets found in the cluster by C(NAMESPACE/NAME), each as the record keeps
      it (C(apiVersion), C(kind), name, namespace, labels, annotations, C(type), C(data)). Holds the values.
  returned: when O(state=backup)
  type: dict
missing:
  description: With O(state=backup), the kept Secrets (C(NAMESPACE/NAME)) the cluster does not have.
  returned: when O(state=backup)
  type: list
  elements: str
certificates:
  description: One entry per kept certificate, in the order of O(certificates).
  returned: with O(state=backup), O(state=restore) and O(state=report)
  type: list
  elements: dict
  contains:
    namespace:
      description: The Secret's namespace.
      type: str
    name:
      description: The Secret's name.
      type: str
    type:
      description: V(ingress), V(api) or V(other).
      type: str
    hostname:
      description: The name it is served for (null when none).
      type: str
    source:
      description: Which copy was judged - C(cluster), C(backup) (O(certificates_backup)) or C(missing).
      type: str
    certificate:
      description:
        - The leaf certificate (the first of C(tls.crt)) - C(subject), C(issuer), C(sans), C(serial) (hex),
          C(not_before), C(not_after) (RFC 3339), C(days_left), C(chain_length), C(hostname), C(covers_hostname),
          C(warnings); null when it could not be read.
        - C(trust_anchor) - the PEM of the certificate a client trusts to verify C(tls.crt), its last certificate
          (the root CA, when the bundle ends with it as OpenShift asks of a named API certificate; the leaf when
          alone). Public; the playbooks add it to the kubeconfig and to Vault's Kubernetes auth once an C(api)
          certificate is wired in.
      type: dict
    key_matches:
      description: Whether C(tls.key) belongs to the certificate (null when not checked).
      type: bool
    problems:
      description: What refuses wiring it in (missing, unreadable, key mismatch, hostname not covered).
      type: list
      elements: str
results:
  description: One entry per object, in the order handled (reverse order for O(state=absent)).
  returned: always
  type: list
  elements: dict
  contains:
    origin:
      description: Where the object came from, C(objects[0]) or C(definition document 2).
      type: str
    api_version:
      description: Its C(apiVersion).
      type: str
    kind:
      description: Its C(kind).
      type: str
    namespace:
      description: The namespace used (null for cluster-scoped kinds).
      type: str
    name:
      description: Its name (null for a read of a whole kind).
      type: str
    action:
      description: created, updated, unchanged, deleted, absent, read or not_found.
      type: str
    changed:
      description: Whether this object changed (or would, in check mode).
      type: bool
    object:
      description:
        - The object as the server has it now (in check mode, would have it), without C(managedFields), Secret
          values hidden.
        - With its C(metadata.resourceVersion), so a caller can apply a merge over the version it read.
      type: dict
    objects:
      description: With O(state=read) and no name, every object of the kind, as RV(results[].object).
      type: list
      elements: dict
    pending:
      description: After a O(wait) timeout, what this object still lacked.
      type: list
      elements: str
    note:
      description: Why a result is not the server's answer (check mode - a namespace created by the same task, or a kind or namespace O(installed_by) brings).
      type: str
"""
