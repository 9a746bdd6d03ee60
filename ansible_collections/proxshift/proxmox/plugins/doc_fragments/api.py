# -*- coding: utf-8 -*-
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# The Proxmox VE API connection every module of proxshift.proxmox takes (pve-client's ConnectionOptions);
# modules name it with extends_documentation_fragment: [proxshift.proxmox.api].
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  api_host:
    description:
      - Proxmox host name or address, optionally with its port (C(pve1:8006), C([fd00::5]:8006)); a
        C(https://host:port) URL is accepted too. A port given here overrides O(api_port). Env C(PROXMOX_HOST).
    type: str
    required: true
  api_port:
    description:
      - API port.
      - Falls back to the environment variable C(PROXMOX_PORT).
    type: int
    default: 8006
  api_user:
    description:
      - User C(user@realm), for password auth or combined with a token name. Env C(PROXMOX_USER).
    type: str
  api_password:
    description:
      - Password (ticket auth). Prefer API tokens. Env C(PROXMOX_PASSWORD).
    type: str
  api_token_id:
    description:
      - API token name (combined with O(api_user)) or full id C(user@realm!name). Preferred over passwords. Env
        C(PROXMOX_TOKEN_ID).
    type: str
  api_token_secret:
    description:
      - API token secret. Env C(PROXMOX_TOKEN_SECRET).
    type: str
  validate_certs:
    description:
      - Verify the API's TLS certificate. Env C(PROXMOX_VALIDATE_CERTS). When false the module warns that the certificate is not verified.
    type: bool
    default: true
  ca_path:
    description:
      - PEM file with the CA that signed the API certificate (Proxmox's cluster CA), trusted in addition to the
        system store. Env C(PROXMOX_CA_PATH) (an empty value counts as unset).
    type: path
  api_timeout:
    description:
      - Seconds per HTTP request.
    type: int
    default: 30
"""
