"""Kubelet certificate signing requests for the tests: the tests play the kubelets (a PKCS#10 request made
with `cryptography`, created under the identity a kubelet has, through impersonation)."""
from __future__ import annotations

import base64
import ipaddress
import time
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kube_fixtures import KubeApi, unique
from standins.controller import FakeController

BOOTSTRAPPER = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
BOOTSTRAP_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:openshift-machine-config-operator",
                    "system:authenticated"]
CLIENT = "kubernetes.io/kube-apiserver-client-kubelet"
SERVING = "kubernetes.io/kubelet-serving"
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


def allow_csr_creation(api: KubeApi):
    """RBAC for the identities the tests impersonate (on a real cluster the bootstrap and node roles)."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "proxshift-test-csr-requester"},
            "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                       "verbs": ["create", "get", "list"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "proxshift-test-csr-requester"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "proxshift-test-csr-requester"},
               "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}]}
    for path, obj in (("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
                      ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)):
        status, out = api.request("POST", path, obj)
        assert status in (201, 409), out


def make_request(cn: str, org: str = "system:nodes", dns=(), ips=()) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.COMMON_NAME, cn), x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)]))
    sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    pem = builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    return base64.b64encode(pem).decode()


def create_csr(api: KubeApi, signer: str, request: str, user: str, groups: list[str]) -> str:
    """Create a CSR as `user` in `groups` would (the API server fills spec.username/groups from them)."""
    name = unique("csr")
    usages = ["digital signature", "key encipherment", "client auth" if signer == CLIENT else "server auth"]
    body = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name}, "spec": {"request": request, "signerName": signer, "usages": usages}}
    headers = [("Impersonate-User", user)] + [("Impersonate-Group", g) for g in groups]
    status, out = api.request("POST", CSRS, body, headers=headers)
    assert status == 201, out
    assert out["spec"]["username"] == user
    return name


def client_csr(api: KubeApi, node: str, user: str = BOOTSTRAPPER, groups=BOOTSTRAP_GROUPS) -> str:
    return create_csr(api, CLIENT, make_request(f"system:node:{node}"), user, list(groups))


def serving_csr(api: KubeApi, node: str, dns=(), ips=()) -> str:
    return create_csr(api, SERVING, make_request(f"system:node:{node}", dns=dns or [node], ips=ips),
                      f"system:node:{node}", ["system:nodes", "system:authenticated"])


def approved(api: KubeApi, name: str) -> bool:
    conds = (api.get(f"{CSRS}/{name}").get("status") or {}).get("conditions") or []
    return any(c["type"] == "Approved" and c["status"] == "True" for c in conds)


class PodTermination(FakeController):
    """The kubelets of live nodes ending the pods being deleted on them: a pod with a `deletionTimestamp` on one
    of `nodes` stops after `stop_seconds` (its containers' SIGTERM handling; never longer than its grace
    period), then its kubelet removes it for good with grace period 0, preconditioned on its uid (kubernetes
    `pkg/kubelet/status/status_manager.go`, `syncPod` once `canBeDeleted`). A node whose kubelet was stopped
    (`KubeApi.stop_kubelet`) does nothing: its pods stay `Terminating`, as on a real cluster."""

    def __init__(self, api: KubeApi, nodes: list[str], stop_seconds: float = 1.0):
        super().__init__()
        self.api, self.nodes, self.stop_seconds = api, nodes, stop_seconds
        self.seen: dict[str, float] = {}
        self.deleted: list[str] = []

    def tick(self) -> None:
        stopped_file = Path(self.api.info["dir"]) / "stopped-kubelets"
        stopped = set(stopped_file.read_text().split()) if stopped_file.exists() else set()
        for node in self.nodes:
            if node in stopped:
                continue
            pods = self.api.ok("GET", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}")["items"]
            for pod in pods:
                meta = pod["metadata"]
                if not meta.get("deletionTimestamp"):
                    continue
                first = self.seen.setdefault(meta["uid"], time.monotonic())
                grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
                if time.monotonic() - first < min(self.stop_seconds, grace):
                    continue
                status, out = self.api.request(
                    "DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                    {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                     "preconditions": {"uid": meta["uid"]}})
                assert status in (200, 404, 409), out
                self.deleted.append(f"{meta['namespace']}/{meta['name']}")
