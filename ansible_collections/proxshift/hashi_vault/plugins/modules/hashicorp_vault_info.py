#!/usr/bin/python
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is the collection's native binary (builds/linux-<machine>/proxshift_hashi_vault),
# which plugins/action/hashicorp_vault_info.py runs. The options must match the Rust argument spec of modules/hashicorp_vault_info; a unit
# test compares them.
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r"""
module: hashicorp_vault_info
short_description: Read a KV secret and its metadata from HashiCorp Vault or OpenBao
description:
  - Reads one KV secret (KV v1 or v2, the latest or a given O(version)) with its metadata. A missing or deleted
    secret is not a failure; RV(found) tells.
  - Only reads; it never changes anything, so it runs the same in check mode. This is the preferred form of
    C(proxshift.hashi_vault.hashicorp_vault) with C(state=read), which keeps working; inside templates use the
    C(proxshift.hashi_vault.kv) lookup.
  - The result holds the secret's values - B(put no_log on the task) and use the registered variable.
  - Connection, auth options and environment fallbacks are those of C(proxshift.hashi_vault.hashicorp_vault).
    Transient failures are retried; a sealed server ends in a message saying so.
  - A native binary module; no Python libraries (hvac) are needed.
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
options:
  path:
    description: Path of the secret inside the mount, without C(data/), for example C(openshift/pull-secret).
    type: str
    required: true
  engine_mount_point:
    description: Mount path of the KV secrets engine (without C(/data/)).
    type: str
    default: secret
  kv_version:
    description:
      - KV engine version of the mount. Detected when not given; set it when the token may not read
        C(sys/internal/ui/mounts/<mount>).
    type: int
    choices: [1, 2]
  version:
    description: The version to read (KV v2 only); the latest when not given.
    type: int
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
    description: The module only reads; check mode runs the same reads and returns the same answer.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
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
- name: Read the pull secret
  proxshift.hashi_vault.hashicorp_vault_info:
    url: https://vault.example.com:8200
    auth_method: approle
    role_id: "{{ vault_role_id }}"
    secret_id: "{{ vault_secret_id }}"
    path: openshift/pull-secret
  register: pull_secret
  no_log: true

- name: Version 2 of a KV v2 secret, token from VAULT_TOKEN
  proxshift.hashi_vault.hashicorp_vault_info:
    url: https://vault.example.com:8200
    path: clusters/sno/kubeadmin
    version: 2
  register: old
  no_log: true
"""

RETURN = r"""
msg:
  description: What was read, or why nothing was found.
  returned: always
  type: str
found:
  description: Whether the secret (version) exists and is not deleted.
  returned: success
  type: bool
data:
  description: The secret's keys and values; null when not RV(found).
  returned: success
  type: dict
metadata:
  description: KV v2 metadata of the version read (C(version), C(created_time), C(deletion_time), C(destroyed)); null for KV v1.
  returned: success
  type: dict
version:
  description: The version read (KV v2); null for KV v1 or a missing secret.
  returned: success
  type: int
kv_version:
  description: The KV engine version of the mount.
  returned: success
  type: int
path:
  description: C(mount/path) of the secret.
  returned: success
  type: str
"""
