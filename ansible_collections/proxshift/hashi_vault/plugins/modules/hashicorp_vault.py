#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_hashi_vault),
# which plugins/action/hashicorp_vault.py runs. The options must match the Rust argument spec of modules/hashicorp_vault; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: hashicorp_vault
short_description: Read, write and delete KV secrets in HashiCorp Vault or OpenBao; Kubernetes auth mounts and policies
description:
  - Reads many KV secrets in one call (C(state=read)), writes a secret idempotently with check-and-set
    (C(state=present)), or soft-deletes / destroys one (C(state=absent)).
  - Converges an ACL policy (C(state=policy)) and a C(kubernetes) auth method mount with its config
    and roles (C(state=kubernetes_auth)), so a cluster's service accounts log in with their own
    tokens and get only their own policies - never a root token on the cluster.
  - Works with KV v1 and KV v2 mounts; the engine version of each mount is detected with
    C(sys/internal/ui/mounts) unless O(kv_version) is given.
  - Secret values are never shown in results, diffs, warnings or errors, with one exception - the
    RV(secrets) result of C(state=read). B(Put no_log on every read task) so Ansible does not
    display that result either; use the registered variable in later tasks.
  - Every value given in O(data) and every value read back while writing or deleting is masked in
    all output. Very short or common values (C(1), C(yes)) are masked wherever they appear, as with
    any no_log value.
  - Transient failures (HTTP 412, 429, 5xx, a sealed or standby server, connection refused,
    timeouts) are retried with exponential backoff; a sealed server ends in a message saying so.
  - A native binary module; no Python libraries (hvac) are needed.
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
options:
  state:
    description:
      - C(read) returns the secrets listed in O(secrets) (the task never reports a change).
        It keeps working; the preferred forms are M(proxshift.hashi_vault.hashicorp_vault_info) for one secret with
        its metadata, and the C(proxshift.hashi_vault.kv) lookup inside templates.
      - C(present) makes the secret at O(path) hold O(data). It reads first and writes only when the
        data differs; KV v2 writes use check-and-set with the version read, re-read and retry once
        when another writer got in between, and then fail clearly.
      - C(absent) soft-deletes the latest version (KV v2, can be undeleted) or deletes the secret
        (KV v1); with O(destroy=true) every version and the metadata are removed for good.
      - C(policy) makes ACL policy O(name) hold O(rules) (compared ignoring trailing blanks).
      - C(kubernetes_auth) enables the C(kubernetes) auth method at C(auth/<auth_mount>) when it is
        not there (another method type there is an error), writes its config when a field differs,
        and creates or updates each role of O(roles) whose fields differ. Roles not listed are left alone.
      - C(lease_acquire) takes the lease at O(path) (KV v2 only) for O(holder) - one writer per cluster. A free
        lease (never taken, released, or data that is not a lease) or one O(holder) already holds is written
        with the holder, O(lease_phase) and an expiry O(lease_ttl) seconds ahead; a lease whose holder's
        expiry has passed is taken over with a warning naming that holder; a lease another run holds fails
        naming that run (its id, host and AWX job), its phase and how long ago it was taken and renewed, with
        nothing written. Every write is a check-and-set on the version read; when another run wrote in
        between, the lease is read and decided again once.
      - C(lease_renew) moves the expiry of O(holder)'s lease O(lease_ttl) seconds ahead and records
        O(lease_phase); it fails when the lease is no longer O(holder)'s (it expired and another run took it
        over), so a run that lost its lease stops before writing more.
      - C(lease_release) frees O(holder)'s lease (the secret keeps C(last_holder) and C(released_at)); a lease
        held by another run is left alone with a warning, a free one is no change. With O(lease_break) it frees
        the lease of that dead run instead (see O(lease_break)).
      - C(lease_keep) keeps O(holder)'s lease renewed for as long as the run lives, whatever it waits for; it
        renews the lease once (failing as C(lease_renew) when the run no longer holds it), then starts a keeper
        process beside the run that renews it every third of O(lease_ttl). The keeper ends when the run's
        process (O(lease_watch_pid)) is gone - a killed run's lease still expires -, when the run released the
        lease, or when the run lost it (another run holds it, or it could not be renewed before it expired);
        then it writes why to O(lease_lost_file), which the playbooks check at every phase and while they wait.
        Needs the module to run on the controller (a local connection).
      - In check mode the lease states read and predict; a lease held by another run is a warning, not a failure;
        C(lease_keep) starts nothing.
    type: str
    choices: [read, present, absent, policy, kubernetes_auth, lease_acquire, lease_renew, lease_release, lease_keep]
    default: present
  engine_mount_point:
    description: Mount path of the KV secrets engine (without C(/data/)).
    type: str
    default: secret
  kv_version:
    description:
      - KV engine version of the mount. Detected per mount when not given; set it when the token may
        not read C(sys/internal/ui/mounts/<mount>).
    type: int
    choices: [1, 2]
  path:
    description:
      - Path of the secret inside the mount, without C(data/), for example C(openshift/cluster1).
      - Required for O(state=present) and O(state=absent).
    type: str
  data:
    description:
      - The key/value pairs the secret must hold (O(state=present)). Every value is treated as a secret.
      - Values are compared as JSON, so C("8443") and C(8443) differ.
    type: dict
  merge:
    description:
      - With C(true), keys already in the secret but not in O(data) are kept; with C(false) the secret
        holds exactly O(data).
    type: bool
    default: false
  cas:
    description:
      - Explicit check-and-set version for KV v2 writes (C(0) = only create). Without it the version
        just read is used. A mismatch fails without retrying.
    type: int
  destroy:
    description:
      - With O(state=absent) on KV v2, destroy every version and delete the metadata instead of
        soft-deleting the latest version.
    type: bool
    default: false
  secrets:
    description:
      - The secrets to read with O(state=read); the result RV(secrets) is a dict keyed by O(secrets[].name).
    type: list
    elements: dict
    suboptions:
      name:
        description: Key of this secret in the result.
        type: str
        required: true
      path:
        description: Path of the secret inside its mount.
        type: str
        required: true
      key:
        description: Return only this key of the secret (otherwise the whole data dict).
        type: str
      version:
        description: Read this KV v2 version instead of the latest.
        type: int
      default:
        description:
          - Value returned when the secret, the version or the key does not exist (otherwise the task
            fails naming it). C(null) cannot be a default.
        type: raw
      engine_mount_point:
        description: Mount of this secret; defaults to the top-level O(engine_mount_point).
        type: str
  name:
    description: Name of the ACL policy (O(state=policy)).
    type: str
  rules:
    description:
      - The policy's rules in HCL (O(state=policy)), for example read on one cluster's paths only -
        C(path "secret/data/clusters/cluster1/*" { capabilities = ["read"] }).
    type: str
  auth_mount:
    description:
      - Path of the Kubernetes auth mount without C(auth/), one per cluster, for example
        C(kubernetes/cluster1) (O(state=kubernetes_auth)).
    type: str
  kubernetes_host:
    description: The cluster's API URL that Vault sends TokenReviews to, for example C(https://api.cluster1.example.com:6443).
    type: str
  kubernetes_ca_cert:
    description:
      - PEM of the CAs that sign the cluster API's serving certificate; Vault verifies the API with it.
        Required for O(state=kubernetes_auth).
      - Vault runs outside the cluster, so C(disable_local_ca_jwt) is always set (and Vault then
        requires the CA).
    type: str
  token_reviewer_jwt:
    description:
      - A long-lived token of a service account bound to C(system:auth-delegator), which Vault uses
        to call the TokenReview API. Without it Vault reviews each login with the JWT being checked,
        which then needs that binding itself.
      - Vault never returns it, only whether one is set, so it is written when Vault has none and
        with every other config change. Never shown in any output.
    type: str
  roles:
    description: Roles of the Kubernetes auth mount (O(state=kubernetes_auth)).
    type: list
    elements: dict
    suboptions:
      name:
        description: The role's name, used at login.
        type: str
        required: true
      bound_service_account_names:
        description: Service accounts that may log in with this role.
        type: list
        elements: str
        required: true
      bound_service_account_namespaces:
        description: Namespaces of those service accounts.
        type: list
        elements: str
        required: true
      token_policies:
        description: Policies of the Vault tokens the role gives out.
        type: list
        elements: str
        default: []
      token_ttl:
        description: Lifetime of those tokens in seconds.
        type: int
        default: 3600
      audience:
        description: The audience the service-account JWT must carry (none checked when unset).
        type: str
  holder:
    description: Who takes, renews or releases the lease (O(state=lease_acquire), C(lease_renew), C(lease_release)).
    type: dict
    suboptions:
      run_id:
        description: The run's own id, unique per playbook run (the lease is this run's while it holds this id).
        type: str
        required: true
      host:
        description: The machine the run is on, shown to a run that is refused.
        type: str
        default: ""
      job_id:
        description: The AWX/AAP job id when the run is a job, shown to a run that is refused.
        type: str
        default: ""
  lease_phase:
    description: The phase the run is in, stored in the lease and shown to a run that is refused.
    type: str
  lease_ttl:
    description:
      - Seconds from now that the lease stays the holder's without a renewal. A run that dies holding it
        blocks the cluster this long at most; the playbooks renew it at every phase.
    type: int
    default: 1800
  lease_break:
    description:
      - The run id of a lease holder you know is dead (its process killed, its machine gone) - C(lease_acquire)
        takes its lease over at once, with a warning, instead of waiting for it to expire (as
        C(terraform force-unlock LOCK_ID)). A lease held by any other run is still refused.
      - With C(lease_release), frees the lease at O(path) when that dead run holds it (the secret keeps it as
        C(last_holder) and this O(holder) as C(broken_by); RV(previous) is the dead run's lease), and leaves a lease
        anyone else holds alone, no change and no warning - how a run that broke a cluster's lease frees every
        other lease the dead run held (the playbooks - its Proxmox placement lease).
    type: str
  lease_wait:
    description:
      - Seconds C(lease_acquire) waits for a lease another run holds, looking again every 2 seconds, instead of
        failing at once; then it fails as without it, saying how long it waited. C(0) - no waiting. Not in check mode.
    type: int
    default: 0
  lease_watch_pid:
    description:
      - The process whose life the C(lease_keep) keeper follows; by default the C(ansible-playbook) process the
        module runs under (the run, not the worker it forked for the task).
    type: int
  lease_lost_file:
    description:
      - Where the C(lease_keep) keeper writes why the run lost its lease (removed when the keeper starts);
        by default C(proxshift-lease-<run_id>.lost) in the temporary directory. Returned as RV(lost_file).
    type: path
  url:
    description: Vault address, for example C(https://vault.example.com:8200). Falls back to C(VAULT_ADDR).
    type: str
    required: true
  namespace:
    description:
      - Namespace (Vault Enterprise, HCP Vault, OpenBao), sent as C(X-Vault-Namespace) on every request,
        login included. Falls back to C(VAULT_NAMESPACE).
    type: str
  ca_cert:
    description:
      - PEM file with the CA certificate(s) that signed the server certificate. Falls back to
        C(ANSIBLE_HASHI_VAULT_CA_CERT), then C(VAULT_CACERT).
    type: path
    aliases: [cacert]
  validate_certs:
    description:
      - Verify the server's TLS certificate. When not given, C(false) if C(VAULT_SKIP_VERIFY) is set to a
        true value, else C(true).
    type: bool
  timeout:
    description: Timeout of each HTTP request, in seconds.
    type: int
    default: 30
  retries:
    description: How many times a transient failure is retried (with exponential backoff from 0.5 s).
    type: int
    default: 3
  auth_method:
    description:
      - How to log in. C(token) uses O(token), C(VAULT_TOKEN) or the token file; the others log in and
        use the token they get.
      - C(kubernetes) sends O(role) and a service-account JWT (O(jwt), or the file O(service_account_token_path)).
    type: str
    choices: [token, approle, kubernetes, jwt, userpass]
    default: token
  mount_point:
    description: Mount path of the auth method when it is not the default (C(approle), C(kubernetes), C(jwt), C(userpass)).
    type: str
  token:
    description: Vault token (O(auth_method=token)). Falls back to C(VAULT_TOKEN), then to the token file.
    type: str
  token_path:
    description:
      - Where the token file is, read when no token is given. As in community.hashi_vault, a directory that holds
        O(token_file) (C($HOME) when not given, so C(~/.vault-token) by default, where the vault/bao CLI writes it);
        a path that is not a directory is the token file itself when O(token_file) is not given.
      - Falls back to C(ANSIBLE_HASHI_VAULT_TOKEN_PATH).
    type: path
  token_file:
    description:
      - Name of the token file in O(token_path); C(.vault-token) when not given. Falls back to
        C(ANSIBLE_HASHI_VAULT_TOKEN_FILE).
    type: str
  token_validate:
    description: Check the token with C(auth/token/lookup-self) before doing anything else.
    type: bool
    default: false
  role_id:
    description: AppRole role ID (O(auth_method=approle)).
    type: str
  secret_id:
    description: AppRole secret ID (O(auth_method=approle)); omit it for roles with C(bind_secret_id=false).
    type: str
  role:
    description: Role to log in as (O(auth_method=kubernetes), required; O(auth_method=jwt), optional).
    type: str
    aliases: [role_name]
  jwt:
    description: The JWT to log in with (O(auth_method=jwt), required; O(auth_method=kubernetes), optional).
    type: str
  service_account_token_path:
    description: Service-account token file read by O(auth_method=kubernetes) when O(jwt) is not given.
    type: path
    default: /var/run/secrets/kubernetes.io/serviceaccount/token
  username:
    description: User name (O(auth_method=userpass)).
    type: str
  password:
    description: Password (O(auth_method=userpass)).
    type: str
attributes:
  check_mode:
    support: full
    description: Reads happen, writes and deletes do not; C(changed) predicts what would change.
  diff_mode:
    support: full
    description: Shows which keys would be added, changed or removed, with every value masked.
notes:
  - Tested against OpenBao 2.7 (the Vault API-compatible server); the HTTP API used is HashiCorp Vault's.
  - Environment fallbacks, first found wins - O(url) C(ANSIBLE_HASHI_VAULT_ADDR), C(VAULT_ADDR); O(namespace)
    C(ANSIBLE_HASHI_VAULT_NAMESPACE), C(VAULT_NAMESPACE); O(token) C(ANSIBLE_HASHI_VAULT_TOKEN), C(VAULT_TOKEN);
    O(ca_cert) C(ANSIBLE_HASHI_VAULT_CA_CERT), C(VAULT_CACERT); O(auth_method), O(role_id), O(secret_id), O(jwt),
    O(username), O(password), O(retries), O(timeout), O(mount_point), O(token_validate) C(ANSIBLE_HASHI_VAULT_<OPTION>)
    (community.hashi_vault's names). An empty
    variable counts as unset (AWX renders a credential field left empty as an empty string).
"""

EXAMPLES = r"""
- name: Read the pull secret, SSH key and CA bundle before provisioning
  proxshift.hashi_vault.hashicorp_vault:
    url: https://vault.example.com:8200
    auth_method: approle
    role_id: "{{ vault_role_id }}"
    secret_id: "{{ vault_secret_id }}"
    state: read
    secrets:
      - name: pull_secret
        path: openshift/pull-secret
        key: pullSecret
      - name: ssh_key
        path: openshift/ssh
        key: public_key
      - name: ca_bundle
        path: pki/ca-bundle
        key: pem
        default: ""
  no_log: true
  register: vault_read

- name: Store the cluster credentials after the install (writes only when they differ)
  proxshift.hashi_vault.hashicorp_vault:
    url: https://vault.example.com:8200
    ca_cert: /etc/pki/vault-ca.pem
    namespace: platform
    path: openshift/cluster1
    data:
      api: https://api.cluster1.example.com:6443
      kubeadmin: "{{ kubeadmin_password }}"
      kubeconfig: "{{ lookup('file', 'auth/kubeconfig') }}"
    merge: true

- name: Read an older version from a KV v1 and a KV v2 mount in one call, logging in from a pod
  proxshift.hashi_vault.hashicorp_vault:
    url: https://vault.example.com:8200
    auth_method: kubernetes
    role: proxshift
    state: read
    secrets:
      - name: previous
        path: openshift/cluster1
        version: 2
      - name: legacy
        path: team/app
        engine_mount_point: kv
  no_log: true

- name: Create only if absent (check-and-set 0)
  proxshift.hashi_vault.hashicorp_vault:
    url: https://vault.example.com:8200
    auth_method: userpass
    username: ops
    password: "{{ ops_password }}"
    path: openshift/cluster1/bootstrap
    data:
      token: "{{ bootstrap_token }}"
    cas: 0

- name: A policy that reads one cluster's secrets only
  proxshift.hashi_vault.hashicorp_vault:
    url: https://vault.example.com:8200
    state: policy
    name: eso-cluster1
    rules: |
      path "secret/data/clusters/cluster1/*" { capabilities = ["read"] }
      path "secret/metadata/clusters/cluster1/*" { capabilities = ["read", "list"] }

- name: Let the External Secrets Operator of cluster1 log in with its service account
  proxshift.hashi_vault.hashicorp_vault:
    url: https://vault.example.com:8200
    state: kubernetes_auth
    auth_mount: kubernetes/cluster1
    kubernetes_host: https://api.cluster1.example.com:6443
    kubernetes_ca_cert: "{{ cluster1_api_ca }}"
    token_reviewer_jwt: "{{ reviewer_token }}"
    roles:
      - name: external-secrets
        bound_service_account_names: [external-secrets]
        bound_service_account_namespaces: [external-secrets]
        token_policies: [eso-cluster1]
        token_ttl: 900

- name: Take the cluster's lease before changing anything (fails naming the run that holds it)
  proxshift.hashi_vault.hashicorp_vault:
    url: https://vault.example.com:8200
    state: lease_acquire
    path: openshift/clusters/cluster1/lease
    holder:
      run_id: "{{ run_id }}"
      host: "{{ lookup('ansible.builtin.pipe', 'uname -n') }}"
      job_id: "{{ awx_job_id | default('') }}"
    lease_phase: preflight
    lease_ttl: 1800

- name: Keep the lease renewed while the run lives (through hour-long waits), a loss written to a file
  proxshift.hashi_vault.hashicorp_vault:
    url: https://vault.example.com:8200
    state: lease_keep
    path: openshift/clusters/cluster1/lease
    holder: "{{ lease_holder }}"
    lease_ttl: 1800
  register: lease_keeper

- name: Stop when the run lost its lease
  ansible.builtin.fail:
    msg: "{{ lookup('ansible.builtin.file', lease_keeper.lost_file) }}"
  when: lease_keeper.lost_file is exists

- name: Remove a cluster's secret for good
  proxshift.hashi_vault.hashicorp_vault:
    url: https://vault.example.com:8200
    path: openshift/cluster1
    state: absent
    destroy: true
"""

RETURN = r"""
msg:
  description: What happened.
  returned: always
  type: str
secrets:
  description:
    - The values read, keyed by O(secrets[].name) - the whole data dict, or one key's value with
      O(secrets[].key), or O(secrets[].default). Contains secret values; set C(no_log) on the task.
  returned: state=read
  type: dict
  sample: {pull_secret: '{"auths": {}}', ssh_key: "ssh-ed25519 AAAA..."}
secrets_info:
  description: Where each secret of RV(secrets) came from (no values).
  returned: state=read
  type: dict
  sample: {pull_secret: {mount: secret, path: openshift/pull-secret, kv_version: 2, version: 3, defaulted: false}}
  contains:
    mount:
      description: The KV mount.
      type: str
    path:
      description: The secret's path inside the mount.
      type: str
    kv_version:
      description: KV engine version of the mount.
      type: int
    version:
      description: The KV v2 version read (null for KV v1 or when the default was used on a missing secret).
      type: int
    defaulted:
      description: Whether the value is the item's default.
      type: bool
path:
  description:
    - The secret written or deleted, as C(<mount>/<path>); for O(state=policy) C(sys/policies/acl/<name>),
      for O(state=kubernetes_auth) C(auth/<auth_mount>).
  returned: state=present, state=absent, state=policy, state=kubernetes_auth or a lease state
  type: str
  sample: secret/openshift/cluster1
kv_version:
  description: KV engine version of the mount.
  returned: state=present or state=absent
  type: int
  sample: 2
version:
  description:
    - KV v2 version - the new one after a write, otherwise the current one (for C(absent), the version
      that was deleted). Null for KV v1 and for a secret that never existed.
  returned: state=present or state=absent
  type: int
  sample: 4
changes:
  description: Names (never values) of the keys the write adds, changes or removes.
  returned: state=present
  type: dict
  sample: {added: [kubeadmin], changed: [kubeconfig], removed: []}
auth_changes:
  description:
    - What O(state=kubernetes_auth) changed (or would change in check mode), one entry per object with
      the fields that differ; C(created) for a new role, C(enabled) for a new mount. Never a value of
      the reviewer JWT.
  returned: state=kubernetes_auth
  type: list
  elements: str
  sample:
    - "auth/kubernetes/cluster1: enabled"
    - "auth/kubernetes/cluster1/config: kubernetes_host, kubernetes_ca_cert, disable_local_ca_jwt, token_reviewer_jwt"
lease:
  description:
    - The lease as written (or as found, when nothing was written) - C(holder), C(phase), the Unix times
      C(acquired_at), C(renewed_at), C(expires_at) (a released lease C(released_at) and C(last_holder)), each
      also as C(<name>_utc) in RFC 3339 - and its KV C(version). Null for a free lease that was not written.
  returned: state=lease_acquire, state=lease_renew or state=lease_release
  type: dict
  sample: {holder: {run_id: 3f2a9c, host: ctl1, job_id: "812"}, phase: vms, acquired_at: 1764892800,
           renewed_at: 1764893100, expires_at: 1764894900, expires_at_utc: "2025-12-05T00:35:00Z", version: 7}
taken_over:
  description: Whether C(lease_acquire) took over an expired lease of another run.
  returned: state=lease_acquire, state=lease_renew or state=lease_release
  type: bool
previous:
  description: The expired or broken lease that was taken over or freed (same fields as RV(lease)), else null.
  returned: state=lease_acquire, state=lease_renew or state=lease_release
  type: dict
keeper_pid:
  description: The process id of the keeper C(lease_keep) started.
  returned: state=lease_keep, not in check mode
  type: int
watch_pid:
  description: The process the keeper follows (the run).
  returned: state=lease_keep, not in check mode
  type: int
renew_every:
  description: Seconds between the keeper's renewals.
  returned: state=lease_keep, not in check mode
  type: int
lost_file:
  description: The file the keeper writes why the run lost its lease to; absent while the run holds it.
  returned: state=lease_keep, not in check mode
  type: str
destroyed:
  description: Whether the absent state destroyed all versions and metadata (KV v2 with O(destroy=true)).
  returned: state=absent
  type: bool
"""
