"""A cluster shut down and started again, played against pvesim and the test kube-apiserver: what the
kube-apiserver-operator and the kubelets of powered-off and powered-on machines write, no more.

- `kubelet_signer`: the kube-apiserver-operator's kubelet CA Secret `openshift-kube-apiserver-operator/
  kube-apiserver-to-kubelet-signer` (type `kubernetes.io/tls`), with the annotations openshift/library-go's
  certificate rotation writes on it (`pkg/operator/certrotation/annotations.go`: `auth.openshift.io/
  certificate-not-after` / `-not-before` as RFC 3339, `auth.openshift.io/certificate-issuer`).
- `PoweredKubelets`: each node's kubelet lives and dies with its VM in pvesim.
  * A VM seen not running: its kubelet is gone (`KubeApi.stop_kubelet`): its Lease is no longer renewed, and the
    real node-lifecycle controller marks the Node `Ready=Unknown`.
  * Seen running again after that, its kubelet boots, after `boot_seconds` (a machine booting). A machine that
    was down longer than its kubelet certificates live (`days_down` past `CLIENT_CERT_DAYS`: OpenShift's
    kubelet certificates are valid 30 days, "Node certificates" in OpenShift's security documentation) bootstraps
    again as a kubelet with an expired certificate does (kubernetes `pkg/kubelet/certificate/bootstrap/
    bootstrap.go` `LoadClientCert`: the current certificate is not valid, so the bootstrap kubeconfig — the
    node-bootstrapper — asks for a new one, k8s.io/client-go `util/certificate/csr` `RequestCertificate` and
    `WaitForCertificate`); until it has one it cannot reach the API and its Node stays `Unknown`. Then it renews
    its Lease, reports `Ready=False` (`KubeletNotReady`) until its serving certificate (expired too, `pkg/kubelet/
    certificate/kubelet.go` `NewKubeletServerCertificateManager`) is issued, then `Ready=True`. A machine down
    for less comes back with its certificates: Lease and `Ready=True`.
  * Nodes boot in the order their VMs came up, each in its own thread, the control plane's no faster.
- `NodeDegradedOperators`: the ClusterOperator `kube-apiserver` `Degraded=True` (`NodeController_MasterNodesReady`,
  "The master nodes not ready: node X not ready") while a control-plane node is not Ready, as the static-pod
  operators' node controller reports it (openshift/library-go `pkg/operator/staticpod/controller/node/
  node_controller.go`, `sync`), and every ClusterOperator stable again once all of them are.
"""
from __future__ import annotations

import base64
import datetime as dt
import threading
import time

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kube_fixtures import KubeApi, condition
from standins.controller import FakeController
from standins.kubelet import CSRS, client_csr, serving_csr

SIGNER_NS = "openshift-kube-apiserver-operator"
SIGNER = "kube-apiserver-to-kubelet-signer"
CLIENT_CERT_DAYS = 30
CO = "/apis/config.openshift.io/v1/clusteroperators"


def _stamp(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def kubelet_signer(api: KubeApi, not_after: dt.datetime) -> None:
    """The kubelet CA Secret, valid until `not_after` (created, or replaced with the new CA)."""
    key = ec.generate_private_key(ec.SECP256R1())
    not_before = not_after - dt.timedelta(days=365)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "openshift"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver-to-kubelet-signer")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(not_before).not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    crt = cert.public_bytes(serialization.Encoding.PEM)
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    status, out = api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": SIGNER_NS}})
    assert status in (201, 409), out
    api.request("DELETE", f"/api/v1/namespaces/{SIGNER_NS}/secrets/{SIGNER}")
    api.ok("POST", f"/api/v1/namespaces/{SIGNER_NS}/secrets", {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": SIGNER, "annotations": {
            "auth.openshift.io/certificate-not-after": _stamp(not_after),
            "auth.openshift.io/certificate-not-before": _stamp(not_before),
            "auth.openshift.io/certificate-issuer": "kube-apiserver-to-kubelet-signer"}},
        "data": {"tls.crt": base64.b64encode(crt).decode(), "tls.key": base64.b64encode(pem_key).decode()}})


def ready_condition(api: KubeApi, node: str) -> dict:
    obj = api.get(f"/api/v1/nodes/{node}") or {}
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == "Ready"), {})


def _report(api: KubeApi, node: str, status: str, reason: str, message: str) -> None:
    now = _stamp(dt.datetime.now(dt.timezone.utc))
    api.patch_status(f"/api/v1/nodes/{node}", {"conditions": [
        {"type": "Ready", "status": status, "reason": reason, "message": message,
         "lastTransitionTime": now, "lastHeartbeatTime": now}]})


def _issued(api: KubeApi, name: str, stop: threading.Event) -> bool:
    """Wait for the CSR's certificate (approved, then signed by kube-controller-manager)."""
    while not stop.is_set():
        if ((api.get(f"{CSRS}/{name}") or {}).get("status") or {}).get("certificate"):
            return True
        time.sleep(0.3)
    return False


class PoweredKubelets(FakeController):
    def __init__(self, api: KubeApi, sim, nodes: dict[str, list[str]], days_down: float = 0,
                 boot_seconds: float = 1.0):
        """`nodes`: node name (= VM name) → its addresses (the serving certificate's SANs)."""
        super().__init__()
        self.api, self.sim, self.nodes = api, sim, nodes
        self.days_down, self.boot_seconds = days_down, boot_seconds
        self.was_down: set[str] = set()
        self.booting: dict[str, threading.Thread] = {}
        self.csrs: dict[str, list[str]] = {}
        self.errors: list[BaseException] = []
        self._halt = threading.Event()

    def running(self) -> dict[str, bool]:
        return {vm["config"].get("name"): bool(vm["running"]) for vm in self.sim.state()["vms"]}

    def tick(self) -> None:
        if self.errors:
            raise self.errors[0]
        running = self.running()
        for node in self.nodes:
            up = running.get(node, False)
            if not up and node not in self.was_down:
                self.api.stop_kubelet(node)
                self.was_down.add(node)
            elif up and node in self.was_down and node not in self.booting:
                t = threading.Thread(target=self._boot_guarded, args=(node,), daemon=True)
                self.booting[node] = t
                t.start()

    def _boot_guarded(self, node: str) -> None:
        try:
            self._boot(node)
        except BaseException as e:  # re-raised by the next tick
            self.errors.append(e)

    def _boot(self, node: str) -> None:
        if self._halt.wait(self.boot_seconds):
            return
        if self.days_down > CLIENT_CERT_DAYS:
            name = client_csr(self.api, node)
            self.csrs.setdefault(node, []).append(name)
            if not _issued(self.api, name, self._halt):
                return
            self.api.start_kubelet(node)
            _report(self.api, node, "False", "KubeletNotReady", "container runtime network not ready")
            name = serving_csr(self.api, node, ips=self.nodes[node])
            self.csrs[node].append(name)
            if not _issued(self.api, name, self._halt):
                return
        else:
            self.api.start_kubelet(node)
        _report(self.api, node, "True", "KubeletReady", "kubelet is posting ready status")
        self.was_down.discard(node)
        self.booting.pop(node, None)

    def __exit__(self, *exc):
        self._halt.set()
        return super().__exit__(*exc)


class NodeDegradedOperators(FakeController):
    def __init__(self, api: KubeApi, masters: list[str]):
        super().__init__()
        self.api, self.masters = api, masters
        self.degraded_seen = False
        self._last: str | None = None

    def tick(self) -> None:
        not_ready = [m for m in self.masters if ready_condition(self.api, m).get("status") != "True"]
        message = "; ".join(f"node {m} not ready" for m in not_ready)
        if message == self._last:
            return
        self._last = message
        if not_ready:
            self.degraded_seen = True
            cond = {**condition("Degraded", "True", f"NodeControllerDegraded: The master nodes not ready: {message}"),
                    "reason": "NodeController_MasterNodesReady"}
            self.api.patch_status(f"{CO}/kube-apiserver", {"conditions": [
                condition("Available", "True"), condition("Progressing", "False"), cond]})
            return
        stable = [condition("Available", "True"), condition("Progressing", "False"), condition("Degraded", "False")]
        for op in self.api.ok("GET", CO)["items"]:
            self.api.patch_status(f"{CO}/{op['metadata']['name']}", {"conditions": stable})
