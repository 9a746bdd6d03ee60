"""The External Secrets operators' own part, played by a thread (only by writing what they write): once OLM
has installed the operator (its CSV Succeeded in `operator_ns`), its operand configuration makes it deploy
the operand — the Deployments of the controller, the webhook and the cert controller, Available — and report
on the configuration. The controller those Deployments stand for is the real one
(`kube_fixtures.external_secrets_controller`), run by the test.

- Red Hat's operator (openshift/external-secrets-operator): the cluster-scoped ExternalSecretsConfig `cluster`
  (operator.openshift.io/v1alpha1) deploys `external-secrets`, `external-secrets-webhook` and
  `external-secrets-cert-controller` and sets `Ready=True` (reason `Ready`) and `Degraded=False` on it
  (api/v1alpha1/conditions.go; pkg/controller/external_secrets/controller.go). Nothing without the config.
- The community helm-based operator (external-secrets/external-secrets-helm-operator, archived at 0.11.0):
  each OperatorConfig (operator.external-secrets.io/v1alpha1) is a Helm release of the chart, so the
  Deployments are `<name>-external-secrets`, `-webhook`, `-cert-controller` in its namespace (the chart's
  `external-secrets.fullname`). Nothing without an OperatorConfig.
"""
from __future__ import annotations

from kube_fixtures import KubeApi, condition
from standins.controller import FakeController

OPS = "/apis/operators.coreos.com/v1alpha1/namespaces"
ESC = "/apis/operator.openshift.io/v1alpha1/externalsecretsconfigs"
OPERATOR_CONFIGS = "/apis/operator.external-secrets.io/v1alpha1/namespaces"
PARTS = ("", "-webhook", "-cert-controller")


class FakeEsoOperator(FakeController):
    def __init__(self, api: KubeApi, operator_ns: str, operand_ns: str):
        self.api, self.operator_ns, self.operand_ns = api, operator_ns, operand_ns
        super().__init__()

    def _installed(self, package: str) -> bool:
        csvs = self.api.ok("GET", f"{OPS}/{self.operator_ns}/clusterserviceversions")["items"]
        return any(c["metadata"]["name"].startswith(package + ".v") and c.get("status", {}).get("phase") == "Succeeded"
                   for c in csvs)

    def tick(self):
        if self._installed("openshift-external-secrets-operator"):
            config = self.api.get(f"{ESC}/cluster")
            if config is not None:
                self._deploy(self.operand_ns, "external-secrets")
                if not config.get("status", {}).get("conditions"):
                    self.api.patch_status(f"{ESC}/cluster", {"conditions": [
                        {**condition("Ready", "True", "reconciliation successful"), "reason": "Ready"},
                        {**condition("Degraded", "False", ""), "reason": "Ready"}]})
        if self._installed("external-secrets-operator"):
            for oc in self.api.ok("GET", f"{OPERATOR_CONFIGS}/{self.operator_ns}/operatorconfigs")["items"]:
                self._deploy(self.operator_ns, f"{oc['metadata']['name']}-external-secrets")

    def _deploy(self, ns: str, base: str):
        api = self.api
        if api.get(f"/api/v1/namespaces/{ns}") is None:
            api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for part in PARTS:
            name = base + part
            path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
            if api.get(path) is not None:
                continue
            labels = {"app.kubernetes.io/name": name}
            api.ok("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", {
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                    "containers": [{"name": "external-secrets", "image": "ghcr.io/external-secrets/external-secrets:v0.16.2"}]}}}})
            api.patch_status(path, {"conditions": [condition("Available", "True", "Deployment has minimum availability.")]})
