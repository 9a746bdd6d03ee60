"""The External Secrets operators' own part, played by a thread (only by writing what they write): once OLM
has installed the operator (its CSV Succeeded in `operator_ns`), its operand configuration makes it deploy
the operand — the Deployments of the controller, the webhook and the cert controller, Available — and report
on the configuration. The controller those Deployments stand for is the real one
(`kube_fixtures.external_secrets_controller`), run by the test.

- Red Hat's operator (openshift/external-secrets-operator): the cluster-scoped ExternalSecretsConfig `cluster`
  (operator.openshift.io/v1alpha1) deploys, always in the namespace `external-secrets` (`REDHAT_OPERAND_NS`: the
  config has no namespace field; Red Hat's "Installing the External Secrets operand by using the CLI" deploys the
  operand components "into the external-secrets namespace"), `external-secrets`, `external-secrets-webhook` and
  `external-secrets-cert-controller` and sets `Ready=True` (reason `Ready`) and `Degraded=False` on it
  (api/v1alpha1/conditions.go; pkg/controller/external_secrets/controller.go). Nothing without the config.
- The community helm-based operator (external-secrets/external-secrets-helm-operator, archived at 0.11.0):
  each OperatorConfig (operator.external-secrets.io/v1alpha1) is a Helm release of the chart, so the
  Deployments are `<name>-external-secrets`, `-webhook`, `-cert-controller` in its namespace (the chart's
  `external-secrets.fullname`). Nothing without an OperatorConfig. Its 0.11 controller's store validation is
  played too (`_validate_stores`).
"""
from __future__ import annotations

from kube_fixtures import KubeApi, condition
from standins.controller import FakeController

OPS = "/apis/operators.coreos.com/v1alpha1/namespaces"
ESC = "/apis/operator.openshift.io/v1alpha1/externalsecretsconfigs"
OPERATOR_CONFIGS = "/apis/operator.external-secrets.io/v1alpha1/namespaces"
PARTS = ("", "-webhook", "-cert-controller")
REDHAT_OPERAND_NS = "external-secrets"


class FakeEsoOperator(FakeController):
    def __init__(self, api: KubeApi, operator_ns: str, bad_stores: tuple[str, ...] = ()):
        """`bad_stores`: ClusterSecretStores the community operand's 0.11 controller cannot validate. Red Hat's
        operand goes to REDHAT_OPERAND_NS whatever the role was told; the community one to `operator_ns`."""
        self.api, self.operator_ns, self.bad_stores = api, operator_ns, bad_stores
        super().__init__()

    def _installed(self, package: str) -> bool:
        csvs = self.api.ok("GET", f"{OPS}/{self.operator_ns}/clusterserviceversions")["items"]
        return any(c["metadata"]["name"].startswith(package + ".v") and c.get("status", {}).get("phase") == "Succeeded"
                   for c in csvs)

    def tick(self):
        if self._installed("openshift-external-secrets-operator"):
            config = self.api.get(f"{ESC}/cluster")
            if config is not None:
                self._deploy(REDHAT_OPERAND_NS, "external-secrets")
                if not config.get("status", {}).get("conditions"):
                    self.api.patch_status(f"{ESC}/cluster", {"conditions": [
                        {**condition("Ready", "True", "reconciliation successful"), "reason": "Ready"},
                        {**condition("Degraded", "False", ""), "reason": "Ready"}]})
        if self._installed("external-secrets-operator"):
            configs = self.api.ok("GET", f"{OPERATOR_CONFIGS}/{self.operator_ns}/operatorconfigs")["items"]
            for oc in configs:
                self._deploy(self.operator_ns, f"{oc['metadata']['name']}-external-secrets")
            if configs:
                self._validate_stores()

    def _validate_stores(self):
        """The community operand's controller (external-secrets v0.11, which cannot run here: the real one of
        the tests is 0.16 and needs external-secrets.io/v1) validates each v1beta1 ClusterSecretStore:
        `Ready=True` reason `Valid` "store validated", or `Ready=False` reason `InvalidProviderConfig`
        (pkg/controllers/secretstore/common.go, `validateStore`)."""
        stores = "/apis/external-secrets.io/v1beta1/clustersecretstores"
        for st in self.api.ok("GET", stores)["items"]:
            if st.get("status", {}).get("conditions"):
                continue
            name = st["metadata"]["name"]
            ok = name not in self.bad_stores
            c = condition("Ready", "True" if ok else "False",
                          "store validated" if ok else "unable to validate store: permission denied (Vault role)")
            c["reason"] = "Valid" if ok else "InvalidProviderConfig"
            self.api.patch_status(f"{stores}/{name}", {"conditions": [c]})

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
