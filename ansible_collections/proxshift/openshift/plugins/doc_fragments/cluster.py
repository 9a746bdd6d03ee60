# -*- coding: utf-8 -*-
# Copyright: ProxShift contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# The connection to an OpenShift cluster's API that the cluster-side modules of proxshift.openshift take
# (kube-client's cluster options, named and read from the environment as kubernetes.core's); modules name it with
# extends_documentation_fragment: [proxshift.openshift.cluster].
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  api_url:
    description:
      - The API URL, for example C(https://api.sno.example.com:6443). Overrides the server of the O(kubeconfig).
      - Falls back to the E(K8S_AUTH_HOST) environment variable.
    type: str
    aliases: [host]
  kubeconfig:
    description:
      - A kubeconfig, as a path or as the kubeconfig text itself (for example the installer's C(auth/kubeconfig)).
      - Falls back to the E(K8S_AUTH_KUBECONFIG) environment variable.
    type: str
  context:
    description:
      - The kubeconfig context to use; default is its C(current-context).
      - Falls back to the E(K8S_AUTH_CONTEXT) environment variable.
    type: str
  api_key:
    description:
      - A bearer token for the API. Overrides a token or client certificate of the O(kubeconfig).
      - Falls back to the E(K8S_AUTH_API_KEY) environment variable.
    type: str
  ca_cert:
    description:
      - PEM file with the CA certificate(s) to trust for the API, in addition to the system store. Overrides the
        O(kubeconfig)'s CA.
      - Falls back to the E(K8S_AUTH_SSL_CA_CERT) environment variable.
    type: path
    aliases: [ssl_ca_cert]
  validate_certs:
    description:
      - Check the API server's certificate. V(false) is for labs only and triggers a warning.
      - Falls back to the E(K8S_AUTH_VERIFY_SSL) environment variable.
    type: bool
    default: true
    aliases: [verify_ssl]
  client_cert:
    description:
      - PEM file with a client certificate to authenticate with, in place of the kubeconfig's user or a token
        (kubernetes.core's C(client_cert)); needs O(client_key).
      - Falls back to the E(K8S_AUTH_CERT_FILE) environment variable.
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - PEM file with the key of O(client_cert).
      - Falls back to the E(K8S_AUTH_KEY_FILE) environment variable.
    type: path
    aliases: [key_file]
"""
