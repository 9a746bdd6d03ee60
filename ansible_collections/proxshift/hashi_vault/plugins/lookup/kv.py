# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thin shim: the Vault login and reads run in the collection's `hashicorp_vault_info` binary
(`--lookup`, options as JSON on stdin); this file only gathers the options and marks the values
unsafe."""
from __future__ import annotations

DOCUMENTATION = r"""
name: kv
short_description: Read KV secrets from HashiCorp Vault or OpenBao
version_added: 0.1.0
author:
  - ProxShift developers (@proxshift)
description:
  - Returns the secret at each path given as a term (KV v1 or v2, the engine version detected per mount), or with
    O(key) the value of that key.
  - Values are marked unsafe, so a secret that contains C({{) is never templated.
  - Connection and auth options and their environment fallbacks are those of the
    C(proxshift.hashi_vault.hashicorp_vault) module; community.hashi_vault's C(ANSIBLE_HASHI_VAULT_*) variables come
    first, C(VAULT_*) next. An empty environment variable counts as unset, as for the modules (AWX renders a
    credential field left empty as C("")).
  - Options can also be set as variables (C(proxshift_vault_url), ..., and community.hashi_vault's
    C(ansible_hashi_vault_*) names) or in C(ansible.cfg) under C([proxshift_vault]) or C([hashi_vault_collection]).
    The ProxShift Vault AppRole credential's extra variables C(vault_auth_method), C(vault_role_id) and
    C(vault_secret_id) are read too; of several variables given, C(proxshift_vault_*) wins.
  - The Vault calls run in the collection's native C(hashicorp_vault_info) binary (the same client as the modules);
    the lookup needs no Python libraries (hvac). Tokens and secret IDs never appear in errors.
options:
  _terms:
    description: Paths of the secrets inside the mount, without C(data/).
    type: list
    elements: str
    required: true
  key:
    description: Return the value of this key instead of the whole secret.
    type: str
  version:
    description: The version to read (KV v2 only); the latest when not given.
    type: int
  default:
    description:
      - Returned when the secret, the version or O(key) does not exist (or the version is deleted). Without it
        that is an error.
    type: raw
  engine_mount_point:
    description: Mount path of the KV secrets engine (without C(/data/)).
    type: str
    default: secret
    vars:
      - name: proxshift_vault_engine_mount_point
  kv_version:
    description: KV engine version of the mount; detected when not given.
    type: int
    choices: [1, 2]
  return_metadata:
    description:
      - Return C({data, metadata}) per term instead of the value alone - the value (the whole secret, or O(key)'s)
        and the secret's KV v2 metadata (C(version), C(created_time), C(custom_metadata), ...; C(null) on KV v1).
      - A default returned for a missing secret is returned as it is.
    type: bool
    default: false
  url:
    description: Vault address, for example C(https://vault.example.com:8200).
    type: str
    required: true
    env:
      - name: ANSIBLE_HASHI_VAULT_ADDR
      - name: VAULT_ADDR
    vars:
      - name: ansible_hashi_vault_url
      - name: ansible_hashi_vault_addr
      - name: proxshift_vault_url
    ini:
      - section: hashi_vault_collection
        key: url
      - section: proxshift_vault
        key: url
  namespace:
    description: Namespace (Vault Enterprise, HCP Vault, OpenBao), sent as C(X-Vault-Namespace).
    type: str
    env:
      - name: ANSIBLE_HASHI_VAULT_NAMESPACE
      - name: VAULT_NAMESPACE
    vars:
      - name: ansible_hashi_vault_namespace
      - name: proxshift_vault_namespace
    ini:
      - section: hashi_vault_collection
        key: namespace
  ca_cert:
    description: PEM file with the CA certificate(s) that signed the server certificate.
    type: path
    aliases: [cacert]
    env:
      - name: ANSIBLE_HASHI_VAULT_CA_CERT
      - name: VAULT_CACERT
    vars:
      - name: ansible_hashi_vault_ca_cert
      - name: proxshift_vault_ca_cert
    ini:
      - section: hashi_vault_collection
        key: ca_cert
  validate_certs:
    description:
      - Verify the server's TLS certificate. When not given, C(false) if C(VAULT_SKIP_VERIFY) is set to a true value,
        else C(true).
    type: bool
    vars:
      - name: ansible_hashi_vault_validate_certs
  timeout:
    description: Timeout of each HTTP request, in seconds.
    type: int
    default: 30
    env:
      - name: ANSIBLE_HASHI_VAULT_TIMEOUT
    vars:
      - name: ansible_hashi_vault_timeout
    ini:
      - section: hashi_vault_collection
        key: timeout
  retries:
    description: How many times a transient failure (a sealed or standby server, 5xx, refused) is retried.
    type: int
    default: 3
    env:
      - name: ANSIBLE_HASHI_VAULT_RETRIES
    vars:
      - name: ansible_hashi_vault_retries
    ini:
      - section: hashi_vault_collection
        key: retries
  auth_method:
    description: How to log in (as the module's O(auth_method)).
    type: str
    choices: [token, approle, kubernetes, jwt, userpass]
    default: token
    env:
      - name: ANSIBLE_HASHI_VAULT_AUTH_METHOD
    vars:
      - name: ansible_hashi_vault_auth_method
      - name: vault_auth_method
      - name: proxshift_vault_auth_method
    ini:
      - section: hashi_vault_collection
        key: auth_method
  mount_point:
    description: Mount path of the auth method when it is not the default.
    type: str
    env:
      - name: ANSIBLE_HASHI_VAULT_MOUNT_POINT
    vars:
      - name: ansible_hashi_vault_mount_point
    ini:
      - section: hashi_vault_collection
        key: mount_point
  token:
    description: Vault token (O(auth_method=token)); then the token file.
    type: str
    env:
      - name: ANSIBLE_HASHI_VAULT_TOKEN
      - name: VAULT_TOKEN
    vars:
      - name: ansible_hashi_vault_token
      - name: proxshift_vault_token
  token_path:
    description:
      - Where the token file is, read when no token is given. As in community.hashi_vault, a directory that holds
        O(token_file) (C($HOME) when not given, so C(~/.vault-token) by default); a path that is not a directory is the
        token file itself when O(token_file) is not given (ProxShift's earlier form).
    type: path
    env:
      - name: ANSIBLE_HASHI_VAULT_TOKEN_PATH
    vars:
      - name: ansible_hashi_vault_token_path
    ini:
      - section: hashi_vault_collection
        key: token_path
  token_file:
    description: Name of the token file in O(token_path); C(.vault-token) when not given.
    type: str
    env:
      - name: ANSIBLE_HASHI_VAULT_TOKEN_FILE
    vars:
      - name: ansible_hashi_vault_token_file
    ini:
      - section: hashi_vault_collection
        key: token_file
  token_validate:
    description: Check the token with C(auth/token/lookup-self) first.
    type: bool
    default: false
    env:
      - name: ANSIBLE_HASHI_VAULT_TOKEN_VALIDATE
    vars:
      - name: ansible_hashi_vault_token_validate
    ini:
      - section: hashi_vault_collection
        key: token_validate
  role_id:
    description: AppRole role ID (O(auth_method=approle)).
    type: str
    env:
      - name: ANSIBLE_HASHI_VAULT_ROLE_ID
    vars:
      - name: ansible_hashi_vault_role_id
      - name: vault_role_id
      - name: proxshift_vault_role_id
    ini:
      - section: hashi_vault_collection
        key: role_id
  secret_id:
    description: AppRole secret ID (O(auth_method=approle)).
    type: str
    env:
      - name: ANSIBLE_HASHI_VAULT_SECRET_ID
    vars:
      - name: ansible_hashi_vault_secret_id
      - name: vault_secret_id
      - name: proxshift_vault_secret_id
  role:
    description: Role to log in as (O(auth_method=kubernetes) or O(auth_method=jwt)).
    type: str
    aliases: [role_name]
  jwt:
    description: The JWT to log in with (O(auth_method=jwt); O(auth_method=kubernetes) reads the service-account token otherwise).
    type: str
    env:
      - name: ANSIBLE_HASHI_VAULT_JWT
  service_account_token_path:
    description: Service-account token file read by O(auth_method=kubernetes) when O(jwt) is not given.
    type: path
    default: /var/run/secrets/kubernetes.io/serviceaccount/token
  username:
    description: User name (O(auth_method=userpass)).
    type: str
    env:
      - name: ANSIBLE_HASHI_VAULT_USERNAME
    vars:
      - name: ansible_hashi_vault_username
  password:
    description: Password (O(auth_method=userpass)).
    type: str
    env:
      - name: ANSIBLE_HASHI_VAULT_PASSWORD
    vars:
      - name: ansible_hashi_vault_password
notes:
  - Each call logs in once and reads every term with that token.
"""

EXAMPLES = r"""
- name: The pull secret's value, token from VAULT_TOKEN / ~/.vault-token, address from VAULT_ADDR
  ansible.builtin.set_fact:
    pull_secret: "{{ lookup('proxshift.hashi_vault.kv', 'openshift/pull-secret', key='pullSecret') }}"
  no_log: true

- name: Version 3 of a KV v2 secret with AppRole, an empty default when the key is missing
  ansible.builtin.debug:
    msg: "{{ lookup('proxshift.hashi_vault.kv', 'clusters/sno/ssh', key='public_key', version=3, default='',
             url='https://vault.example.com:8200', auth_method='approle',
             role_id=vault_role_id, secret_id=vault_secret_id) }}"

- name: Two whole secrets from a KV v1 mount
  ansible.builtin.debug:
    msg: "{{ query('proxshift.hashi_vault.kv', 'app/db', 'app/cache', engine_mount_point='kv1') }}"
"""

RETURN = r"""
_raw:
  description:
    - One value per term - the whole secret (a dict) or, with O(key), that key's value; with O(return_metadata)
      C({data, metadata}). Marked unsafe.
  type: list
  elements: raw
"""


import os

from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible.utils.unsafe_proxy import wrap_var
from ansible_collections.proxshift.hashi_vault.plugins.plugin_utils.binary_module import backend_options, run_backend


# The options the binary takes (its Rust spec) besides the terms.
BACKEND_OPTIONS = (
    "key", "version", "engine_mount_point", "kv_version", "return_metadata", "url", "namespace", "ca_cert", "validate_certs",
    "timeout", "retries", "auth_method", "mount_point", "token", "token_path", "token_file",
    "token_validate", "role_id",
    "secret_id", "role", "jwt", "service_account_token_path", "username", "password",
)


def vault_skip_verify(value: str) -> bool:
    """VAULT_SKIP_VERIFY as Vault's own CLI reads it: set to anything but a false word means skip."""
    return value.strip().lower() not in ("", "0", "false", "no", "off")


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=self._plugin_vars(variables), direct=kwargs)
        options = backend_options(self, BACKEND_OPTIONS, self._templar)
        if options.get("validate_certs") is None:
            options["validate_certs"] = not vault_skip_verify(os.environ.get("VAULT_SKIP_VERIFY", ""))
        options["terms"] = [str(t) for t in terms]
        if "default" in kwargs:
            options["use_default"] = True
            options["default"] = kwargs["default"]
        result = run_backend("--lookup", options, "proxshift.hashi_vault.kv", AnsibleError)
        return [wrap_var(v) for v in result.get("values", [])]

    def _plugin_vars(self, variables):
        """The variables this lookup reads (its options' `vars:`), templated. Ansible hands a lookup its variables
        raw, and would make a `type: path` option's template (`ansible_hashi_vault_token_path: "{{ dir }}"`) a path
        relative to the working directory before anything templates it."""
        if not variables:
            return variables
        names = C.config.get_plugin_vars("lookup", self._load_name)
        return {name: self._templar.template(variables[name]) for name in names if name in variables}
