"""The kube-apiserver-operator's part in serving a named API certificate, played by a thread: what the
APIServer `cluster`'s `spec.servingCerts.namedCertificates` names ends up in the files the real kube-apiserver
serves its named certificate from, and the real kube-apiserver (k8s.io/apiserver `dynamiccertificates`) notices
the files changed and serves the new certificate to clients that ask for its names by SNI, without a restart.

Upstream, in that order:
- openshift/cluster-kube-apiserver-operator `pkg/operator/configobservation/apiserver/observe_apiserver.go`
  (`ObserveNamedCertificates` / `observeNamedCertificates`): the i-th named certificate's Secret
  `openshift-config/<servingCertificate.name>` is synced to `openshift-kube-apiserver/user-serving-cert-00i`
  and served from `/etc/kubernetes/static-pod-certs/secrets/user-serving-cert-00i/tls.{crt,key}`; no named
  certificate, nothing synced (the config is pruned).
- openshift/library-go `pkg/operator/staticpod/certsyncpod/certsync_controller.go` (`CertSyncController.sync`,
  the kube-apiserver pod's cert-syncer): writes the synced Secret's `tls.crt` and `tls.key` to that folder,
  staged and renamed into place.
- kubernetes/kubernetes `staging/src/k8s.io/apiserver/pkg/server/dynamiccertificates/dynamic_serving_content.go`
  (`DynamicCertKeyPairContent.watchCertKeyFile`, fsnotify, a rename re-adds the watch; `loadCertKeyPair` takes a
  pair only when key and certificate match) and `named_certificates.go` (`BuildNamedCertificates`: the names
  served are the certificate's CN and DNS SANs when the flag gives none).

The test kube-apiserver serves its named certificate from `TestEnv::named_cert`/`named_key`
(`--tls-sni-cert-key`, kube_client::testenv); this stand-in writes there the first named certificate's Secret
(the only one the tests wire), or the files it started with when the APIServer names none. Unlike OpenShift the
SNI names are the certificate's own (OpenShift passes the entry's `names`), so a test's certificate carries the
name its clients use (`localhost`). Leaving the `with` block puts the files it started with back.
"""
from __future__ import annotations

import base64
import os
from pathlib import Path

from kube_fixtures import KubeApi
from standins.controller import FakeController

APISERVER = "/apis/config.openshift.io/v1/apiservers/cluster"


class FakeKubeApiserverOperator(FakeController):
    def __init__(self, api: KubeApi):
        self.api = api
        self.cert, self.key = Path(api.info["named_cert"]), Path(api.info["named_key"])
        self.initial = (self.cert.read_bytes(), self.key.read_bytes())
        super().__init__()

    def wanted(self) -> tuple[bytes, bytes]:
        """The pair the APIServer's first named certificate names, or the initial one."""
        named = (((self.api.get(APISERVER) or {}).get("spec") or {}).get("servingCerts") or {}).get("namedCertificates")
        if not named:
            return self.initial
        name = named[0]["servingCertificate"]["name"]
        secret = self.api.get(f"/api/v1/namespaces/openshift-config/secrets/{name}")
        if secret is None:  # the operator degrades and keeps serving what it served
            return self.cert.read_bytes(), self.key.read_bytes()
        return base64.b64decode(secret["data"]["tls.crt"]), base64.b64decode(secret["data"]["tls.key"])

    def write(self, pair: tuple[bytes, bytes]):
        """(certificate, key) into the files, the key first (a pair that does not match is not loaded)."""
        for path, data in ((self.key, pair[1]), (self.cert, pair[0])):
            if path.read_bytes() != data:
                staged = path.with_name(f".{path.name}.staged")
                staged.write_bytes(data)
                os.replace(staged, path)

    def tick(self):
        self.write(self.wanted())

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self.write(self.initial)
