"""The OpenShift GitOps operator, Argo CD's application controller and the hub's GitOps addon, played by a
thread for the gitops role's tests (only by writing what they write): the operator's Argo CD server
Deployment (Available), each Application's sync and health status with its resources, and a GitOpsCluster's
`status.phase`. Which upstream code each behaviour follows: tests/standins/README.md.
"""
from __future__ import annotations

from kube_fixtures import KubeApi, condition
from standins.controller import FakeController

APPS = "/apis/argoproj.io/v1alpha1/namespaces"


class FakeGitOps(FakeController):
    """The GitOps operator, Argo CD's application controller and the hub's GitOps addon, for `ns`."""

    def __init__(self, api: KubeApi, ns: str, hub_ns: str, healthy: bool = True):
        self.api, self.ns, self.hub_ns, self.healthy = api, ns, hub_ns, healthy
        super().__init__()

    def tick(self):
        api, ns = self.api, self.ns
        if api.get(f"/api/v1/namespaces/{ns}") is None:
            api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        dep = f"/apis/apps/v1/namespaces/{ns}/deployments/openshift-gitops-server"
        if api.get(dep) is None:
            labels = {"app.kubernetes.io/name": "openshift-gitops-server"}
            api.ok("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", {
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "openshift-gitops-server", "namespace": ns},
                "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                    "containers": [{"name": "argocd-server", "image": "quay.io/argoproj/argocd:v3.0.0"}]}}}})
            api.patch_status(dep, {"conditions": [condition("Available", "True", "Deployment has minimum availability.")]})
        for app in api.ok("GET", f"{APPS}/{ns}/applications")["items"]:
            if app.get("status", {}).get("sync"):
                continue
            src = app["spec"]["source"]
            res = [{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "team-a", "name": "web",
                    "status": "Synced" if self.healthy else "OutOfSync",
                    "health": {"status": "Healthy"} if self.healthy else
                    {"status": "Degraded", "message": "Deployment \"web\" exceeded its progress deadline"}}]
            api.ok("PATCH", f"{APPS}/{ns}/applications/{app['metadata']['name']}", {"status": {
                "sync": {"status": "Synced" if self.healthy else "OutOfSync", "revision": "4f2c1e0",
                         "comparedTo": {"source": src, "destination": app["spec"]["destination"]}},
                "health": {"status": "Healthy" if self.healthy else "Degraded"}, "resources": res,
                **({} if self.healthy else {"operationState": {"phase": "Failed", "message": "one or more objects failed to apply",
                                                               "startedAt": "2026-01-01T00:00:00Z",
                                                               "operation": {"sync": {"revision": "4f2c1e0"}}}})}},
                   content_type="application/merge-patch+json")
        gc = f"/apis/apps.open-cluster-management.io/v1beta1/namespaces/{self.hub_ns}/gitopsclusters"
        for g in api.ok("GET", gc)["items"]:
            if not g.get("status"):
                api.patch_status(f"{gc}/{g['metadata']['name']}", {
                    "phase": "successful", "message": "Added managed clusters to argo",
                    "lastUpdateTime": "2026-01-01T00:00:00Z"})
