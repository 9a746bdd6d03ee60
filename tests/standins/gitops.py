"""The OpenShift GitOps operator, Argo CD's application controller and the hub's GitOps addon, played by a
thread for the gitops role's tests (only by writing what they write): the operator's Argo CD server
Deployment (Available), each Application's sync and health status with its resources, and a GitOpsCluster's
`status.phase`. Which upstream code each behaviour follows: tests/standins/README.md.
"""
from __future__ import annotations

import base64
import json

from kube_fixtures import KubeApi, condition
from standins.controller import FakeController
from standins.olm import crd

APPS = "/apis/argoproj.io/v1alpha1/namespaces"


OPS = "/apis/operators.coreos.com/v1alpha1/namespaces"
SYNC_FAILED = ("one or more synchronization tasks completed unsuccessfully, reason: the server could not find the "
               "requested resource (the CRD of a resource is still being installed)")


class FakeGitOps(FakeController):
    """The GitOps operator (installed through OLM in `op_ns`), Argo CD's application controller in `ns`,
    and the hub's GitOps addon in `hub_ns`.

    - The operator creates `ns` and the Argo CD server Deployment only once its CSV in `op_ns` is
      Succeeded: before OLM installed it there is no operator (redhat-developer/gitops-operator
      `controllers/gitopsservice_controller.go` makes the default instance when it runs).
    - Argo CD's first automated sync of a revision fails (a CRD still installing); it tries again only
      when the Application has `spec.syncPolicy.retry` (argoproj/argo-cd `controller/appcontroller.go`
      `autoSync`: "Skipping auto-sync: failed previous sync attempt" for the same revision; the retry
      with backoff is `controller/sync.go` / `operationState.retryCount`). `healthy=False`: the retried
      sync leaves the Deployment Degraded.
    - `private=True`: the repository needs credentials. An Application whose namespace holds no repository Secret
      (label `argocd.argoproj.io/secret-type: repository`) with its `repoURL` as `url` is not synced: sync status
      `Unknown` and a `ComparisonError` condition "authentication required" (argoproj/argo-cd `controller/state.go`
      `CompareAppState`: "Failed to load target state", `ApplicationConditionComparisonError`; the repo-server finds
      credentials only among its own namespace's repository Secrets, `util/db/repository_secrets.go`). The same for
      the cluster's Argo CD in `ns` and the hub's in `hub_ns`.
    """

    def __init__(self, api: KubeApi, ns: str, hub_ns: str, op_ns: str, healthy: bool = True,
                 hub_api: KubeApi | None = None, private: bool = False):
        """`hub_api`: the ACM hub when it is another API server than the cluster's `api`."""
        self.api, self.ns, self.hub_ns, self.op_ns, self.healthy = api, ns, hub_ns, op_ns, healthy
        self.private = private
        self.hub_api = hub_api or api
        super().__init__()

    def _operator_installed(self) -> bool:
        csvs = self.api.ok("GET", f"{OPS}/{self.op_ns}/clusterserviceversions")["items"]
        return any(c.get("status", {}).get("phase") == "Succeeded" for c in csvs)

    def tick(self):
        api, ns = self.api, self.ns
        if not self._operator_installed():
            self._hub()
            return
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
            self._sync(api, app)
        self._hub()

    def _readable(self, api: KubeApi, app: dict) -> bool:
        if not self.private:
            return True
        ns, url = app["metadata"]["namespace"], app["spec"]["source"]["repoURL"]
        secrets = api.ok("GET", f"/api/v1/namespaces/{ns}/secrets?labelSelector=argocd.argoproj.io/secret-type%3Drepository")
        return any(base64.b64decode((s.get("data") or {}).get("url", "")).decode() == url for s in secrets["items"])

    def _sync(self, api: KubeApi, app: dict):
        op = app.get("status", {}).get("operationState")
        retry = app["spec"].get("syncPolicy", {}).get("retry")
        if not self._readable(api, app):
            if (app.get("status") or {}).get("sync", {}).get("status") != "Unknown":
                api.ok("PATCH", f"{APPS}/{app['metadata']['namespace']}/applications/{app['metadata']['name']}", {"status": {
                    "sync": {"status": "Unknown"}, "health": {"status": "Healthy"},
                    "conditions": [{"type": "ComparisonError", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": (
                        "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown "
                        f"desc = failed to list refs: authentication required: {app['spec']['source']['repoURL']}")}]}},
                    content_type="application/merge-patch+json")
            return
        if op is None:
            self._status(api, app, "OutOfSync", "Missing", {"phase": "Failed", "message": SYNC_FAILED, "retryCount": 0})
        elif op["phase"] == "Failed" and op.get("retryCount") == 0 and retry:
            if self.healthy:
                self._status(api, app, "Synced", "Healthy", {"phase": "Succeeded", "message": "successfully synced (all tasks run)",
                                                        "retryCount": 1})
            else:
                self._status(api, app, "OutOfSync", "Degraded", {"phase": "Failed", "message": "one or more objects failed to apply",
                                                            "retryCount": 1})

    def _status(self, api: KubeApi, app: dict, sync: str, health: str, op: dict):
        ok = health == "Healthy"
        res = [{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "team-a", "name": "web",
                "status": sync, "health": {"status": health} if ok or health == "Missing" else
                {"status": health, "message": "Deployment \"web\" exceeded its progress deadline"}}]
        api.ok("PATCH", f"{APPS}/{app['metadata']['namespace']}/applications/{app['metadata']['name']}", {"status": {
            "sync": {"status": sync, "revision": "4f2c1e0",
                     "comparedTo": {"source": app["spec"]["source"], "destination": app["spec"]["destination"]}},
            "health": {"status": health}, "resources": res, "conditions": None,
            "operationState": {"startedAt": "2026-01-01T00:00:00Z", "operation": {"sync": {"revision": "4f2c1e0"}}, **op}}},
            content_type="application/merge-patch+json")

    def __enter__(self):
        # What ACM and OpenShift GitOps serve on the hub besides the fixture CRDs: PlacementDecisions
        # (open-cluster-management-io/api cluster/v1beta1) and ApplicationSets (argoproj/argo-cd).
        self.hub_api.install_crd(crd("cluster.open-cluster-management.io", "PlacementDecision", "placementdecisions",
                                     "Namespaced", ["v1beta1"]))
        self.hub_api.install_crd(crd("argoproj.io", "ApplicationSet", "applicationsets", "Namespaced", ["v1alpha1"]))
        return super().__enter__()

    def _hub(self):
        """ACM's placement controller and GitOps addon on the hub namespace.

        - Placement: the ManagedClusters labelled into one of `spec.clusterSets` that is bound to the namespace
          (a ManagedClusterSetBinding there), written to PlacementDecision `<placement>-decision-1`, labelled
          `cluster.open-cluster-management.io/placement` (open-cluster-management-io/ocm
          pkg/placement/controllers/scheduling/scheduling_controller.go, `bind`).
        - GitOpsCluster: from its Placement's decisions only (stolostron/multicloud-integrations
          pkg/controller/gitopscluster/gitopscluster_controller.go, `GetManagedClustersByPlacement`,
          `addManagedClustersToArgo`): an Argo CD cluster secret `<cluster>-application-manager-cluster-secret` per
          decided cluster, then `phase: successful`. No decision yet: no status. Reconciled continuously (the
          controller watches PlacementDecisions): a cluster decided later gets its secret too.
        - ApplicationSet with a `clusterDecisionResource` generator: one Application per cluster the labelled
          PlacementDecisions list, its template rendered with the cluster's `name` and `server` (from its Argo CD
          cluster secret) in place of `{{name}}` and `{{server}}` (argoproj/argo-cd
          `applicationset/generators/duck_type.go` `GenerateParams`, `applicationset/utils/utils.go` `RenderTemplateParams`
          with fasttemplate), written to the ApplicationSet's namespace, and rewritten when the template changes.
        - The hub's Argo CD syncs those Applications as the cluster's syncs its own (`_sync`).
        """
        api, ns = self.hub_api, self.hub_ns
        ocm = "/apis/cluster.open-cluster-management.io"
        for p in api.ok("GET", f"{ocm}/v1beta1/namespaces/{ns}/placements")["items"]:
            name = p["metadata"]["name"]
            bound = [s for s in p["spec"].get("clusterSets", [])
                     if api.get(f"{ocm}/v1beta2/namespaces/{ns}/managedclustersetbindings/{s}") is not None]
            clusters = [c["metadata"]["name"] for c in api.ok("GET", f"{ocm}/v1/managedclusters")["items"]
                        if c["metadata"].get("labels", {}).get("cluster.open-cluster-management.io/clusterset") in bound]
            path = f"{ocm}/v1beta1/namespaces/{ns}/placementdecisions"
            have = api.get(f"{path}/{name}-decision-1")
            if have is None:
                have = api.ok("POST", path, {
                    "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
                    "metadata": {"name": f"{name}-decision-1", "namespace": ns,
                                 "labels": {"cluster.open-cluster-management.io/placement": name}}})
            decisions = [{"clusterName": c, "reason": ""} for c in clusters]
            if have.get("status", {}).get("decisions") != decisions:
                api.patch_status(f"{path}/{name}-decision-1", {"decisions": decisions})
        gc = f"/apis/apps.open-cluster-management.io/v1beta1/namespaces/{ns}/gitopsclusters"
        for g in api.ok("GET", gc)["items"]:
            placement = g["spec"]["placementRef"]["name"]
            decision = api.get(f"{ocm}/v1beta1/namespaces/{ns}/placementdecisions/{placement}-decision-1")
            if decision is None:
                continue
            for c in [d["clusterName"] for d in decision.get("status", {}).get("decisions") or []]:
                if api.get(f"/api/v1/namespaces/{ns}/secrets/{c}-application-manager-cluster-secret") is None:
                    api.ok("POST", f"/api/v1/namespaces/{ns}/secrets", {
                        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                        "metadata": {"name": f"{c}-application-manager-cluster-secret", "namespace": ns, "labels": {
                            "argocd.argoproj.io/secret-type": "cluster", "apps.open-cluster-management.io/acm-cluster": "true",
                            "apps.open-cluster-management.io/cluster-name": c}},
                        "stringData": {"name": c, "server": f"https://{c}-control-plane:6443"}})
            if (g.get("status") or {}).get("phase") != "successful":
                api.patch_status(f"{gc}/{g['metadata']['name']}", {
                    "phase": "successful", "message": "Added managed clusters to argo",
                    "lastUpdateTime": "2026-01-01T00:00:00Z"})
        self._application_sets()
        for app in api.ok("GET", f"{APPS}/{ns}/applications")["items"]:
            self._sync(api, app)

    def _application_sets(self):
        api, ns = self.hub_api, self.hub_ns
        ocm = "/apis/cluster.open-cluster-management.io"
        for aset in api.ok("GET", f"{APPS}/{ns}/applicationsets")["items"]:
            gen = (aset["spec"].get("generators") or [{}])[0].get("clusterDecisionResource")
            if not gen:
                continue
            placement = gen["labelSelector"]["matchLabels"]["cluster.open-cluster-management.io/placement"]
            decision = api.get(f"{ocm}/v1beta1/namespaces/{ns}/placementdecisions/{placement}-decision-1") or {}
            for c in [d["clusterName"] for d in (decision.get("status") or {}).get("decisions") or []]:
                secret = api.get(f"/api/v1/namespaces/{ns}/secrets/{c}-application-manager-cluster-secret")
                if secret is None:
                    continue
                server = base64.b64decode(secret["data"]["server"]).decode()
                text = json.dumps(aset["spec"]["template"]).replace("{{name}}", c).replace("{{server}}", server)
                app = json.loads(text)
                name = app["metadata"]["name"]
                have = api.get(f"{APPS}/{ns}/applications/{name}")
                if have is None:
                    api.ok("POST", f"{APPS}/{ns}/applications", {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                                                                 "metadata": {"name": name, "namespace": ns},
                                                                 "spec": app["spec"]})
                elif have["spec"] != app["spec"]:
                    api.ok("PUT", f"{APPS}/{ns}/applications/{name}", {**have, "spec": app["spec"]})
