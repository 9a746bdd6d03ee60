"""OLM played by a thread for the tests of roles that install operators (olm_operator, external_secrets,
gitops): `FakeOlm` writes what OLM writes — the Subscription's status (currentCSV, installedCSV,
installPlanRef, conditions), the InstallPlans and the ClusterServiceVersion with its status phase — from the
Subscription a role applied. It moves a CSV from Installing to Succeeded only after the role has read it
once (the audit log shows the GET), so the role's wait is seen to wait. A Subscription naming the source
`MISSING_SOURCE` or the channel `UNKNOWN_CHANNEL` gets OLM's conditions for those.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from standins.controller import FakeController
from kube_fixtures import ESO_CRDS, KubeApi
from testlib import REPO

OPS = "/apis/operators.coreos.com/v1alpha1/namespaces"
GROUPS = "/apis/operators.coreos.com/v1/namespaces"
MISSING_SOURCE = "no-such-catalog"
UNKNOWN_CHANNEL = "no-such-channel"
NOW = "2026-01-01T00:00:00Z"


def cond(t: str, s: str, reason: str, msg: str) -> dict:
    return {"type": t, "status": s, "reason": reason, "message": msg, "lastTransitionTime": NOW}


HEALTHY = cond("CatalogSourcesUnhealthy", "False", "AllCatalogSourcesHealthy", "all available catalogsources are healthy")
SUCCEEDED = {"phase": "Succeeded", "reason": "InstallSucceeded", "message": "install strategy completed"}
INSTALLING = {"phase": "Installing", "reason": "InstallWaiting", "message": "installing: waiting for deployment"}
FAILED = {"phase": "Failed", "reason": "InstallCheckFailed",
          "message": "install timeout: deployment demo-controller not available"}


def crd(group: str, kind: str, plural: str, scope: str, versions: list[str]) -> dict:
    """A CRD as a bundle ships one, reduced to what the API server needs to serve the kind (the schema keeps
    unknown fields); the last version is the storage version."""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope,
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                     "versions": [{"name": v, "served": True, "storage": v == versions[-1], "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
                                  for v in versions]}}


def bundle_crds(*folders: Path) -> list[dict]:
    """The CRDs of every `*.yaml` in `folders`, as files that are byte-for-byte upstream copies
    (tests/fixtures/crds/SOURCES.md)."""
    return [doc for folder in folders for path in sorted(folder.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


# The catalogs as they are, for the packages the roles install. Each package: its catalog source, its channels
# (the first is the default), the head CSV's version, and the CRDs its bundle installs (OLM creates them when it
# runs the InstallPlan, before the CSV: pkg/controller/operators/catalog/step.go).
CATALOG = {
    # Red Hat's External Secrets Operator for Red Hat OpenShift: openshift/external-secrets-operator
    # bundle/metadata/annotations.yaml (package openshift-external-secrets-operator; the repository's bundle says
    # channel alpha, the redhat-operators catalog publishes stable-v1, the default, and stable-v1.3); its operand
    # is configured by the ExternalSecretsConfig (cluster-scoped, operator.openshift.io/v1alpha1). Its 1.0 bundle
    # (branch release-1.0, CSV external-secrets-operator.v1.0.0) owns the operator.openshift.io ExternalSecretsConfig
    # and ExternalSecretsManager CRDs (copied as they are) and the external-secrets.io CRDs of the operand it
    # deploys, external-secrets v0.19.0. v0.19.0 cannot be built here (the Go module proxy does not serve it), so the
    # external-secrets.io CRDs created are those of the controller that runs, v0.16.2 (tests/standins/README.md,
    # "Known gaps", says what differs).
    "openshift-external-secrets-operator": {
        "source": "redhat-operators", "channels": ["stable-v1", "stable-v1.3"], "version": "1.0.0",
        "crds": bundle_crds(REPO / "tests" / "fixtures" / "crds" / "openshift-external-secrets-operator", ESO_CRDS)},
    # The community bundle, frozen at 0.11.0 (external-secrets/external-secrets-helm-operator, archived): a
    # helm-based operator whose chart is installed per OperatorConfig (operator.external-secrets.io/v1alpha1).
    "external-secrets-operator": {
        "source": "community-operators", "channels": ["stable", "alpha"], "version": "0.11.0",
        # Its 0.11 CRDs serve v1alpha1 and v1beta1 only (external-secrets.io/v1 came with 0.16). Only for a
        # fresh API server: on one with the 0.16 CRDs they are kept as they are.
        "crds": [crd("operator.external-secrets.io", "OperatorConfig", "operatorconfigs", "Namespaced", ["v1alpha1"]),
                 *[crd("external-secrets.io", kind, f"{kind.lower()}s", scope, ["v1alpha1", "v1beta1"])
                   for kind, scope in (("ClusterSecretStore", "Cluster"), ("SecretStore", "Namespaced"),
                                       ("ExternalSecret", "Namespaced"), ("ClusterExternalSecret", "Cluster"))]]},
    # Red Hat OpenShift GitOps (redhat-developer/gitops-operator bundle: package openshift-gitops-operator,
    # channel latest and gitops-<minor>).
    "openshift-gitops-operator": {"source": "redhat-operators", "channels": ["latest", "gitops-1.16"], "version": "1.16.0",
                                  "crds": []},
}
# Packages the OLM tests invent, served from any catalog on any channel.
TEST_PACKAGES = ("demo-operator", "broken-operator", "flaky-operator", "pinned-operator", "other-operator")


class FakeOlm(FakeController):
    """OLM's catalog and OLM operators, reduced to what a Subscription in `ns` leads to."""

    def __init__(self, api: KubeApi, ns: str, csv_outcome: str = "Succeeded", module_user: str = "kc-admin"):
        """`csv_outcome`: `Succeeded`; `Failed` (stays Failed); `FailedOnce` (Failed first, retried by OLM
        once the role has seen it, then Installing and Succeeded). `module_user`: who the role's modules are
        in the audit log (the kubeconfig's user)."""
        self.api, self.ns, self.csv_outcome, self.module_user = api, ns, csv_outcome, module_user
        self.audit = Path(api.info["dir"]) / "audit.log"
        self._pos = self.audit.stat().st_size if self.audit.exists() else 0
        self._read_csvs: set[str] = set()
        super().__init__()

    def _role_read(self, csv: str) -> bool:
        """Whether the role (`module_user`, the kubeconfig's) has GET the CSV since we started."""
        if self.audit.exists():
            with open(self.audit) as f:
                f.seek(self._pos)
                chunk = f.read()
            done = chunk.rfind("\n") + 1
            self._pos += len(chunk[:done].encode())
            for line in chunk[:done].splitlines():
                e = json.loads(line)
                if e["verb"] == "get" and e["user"]["username"] == self.module_user \
                        and "/clusterserviceversions/" in e["requestURI"]:
                    self._read_csvs.add(e["requestURI"].split("?")[0].rsplit("/", 1)[1])
        return csv in self._read_csvs

    def sub_status(self, sub: dict, **status):
        self.api.patch_status(f"{OPS}/{self.ns}/subscriptions/{sub['metadata']['name']}", {"lastUpdated": NOW, **status})

    def tick(self):
        api, ns = self.api, self.ns
        for sub in api.ok("GET", f"{OPS}/{ns}/subscriptions")["items"]:
            spec, st = sub["spec"], sub.get("status", {})
            if spec["source"] == MISSING_SOURCE:
                msg = f"targeted catalogsource {spec['sourceNamespace']}/{spec['source']} missing"
                if not st.get("conditions"):
                    self.sub_status(sub, conditions=[
                        cond("CatalogSourcesUnhealthy", "True", "UnhealthyCatalogSourceFound", msg)])
                continue
            unresolvable = self._unresolvable(spec, sub["metadata"]["name"])
            if unresolvable:
                if not any(c["type"] == "ResolutionFailed" for c in st.get("conditions", [])):
                    self.sub_status(sub, conditions=[
                        HEALTHY, cond("ResolutionFailed", "True", "ConstraintsNotSatisfiable", unresolvable)])
                continue
            package = CATALOG.get(spec["name"], {"version": "1.0.0", "crds": []})
            csv = spec.get("startingCSV") or f"{spec['name']}.v{package['version']}"
            manual = spec["installPlanApproval"] == "Manual"
            plan = f"install-{spec['name']}"
            if not st.get("currentCSV"):
                self._plan(plan, csv, approved=not manual)
                if manual:  # a later version's plan too: never to be approved by the role
                    self._plan(f"{plan}-upgrade", f"{spec['name']}.v9.0.0", approved=False)
                self.sub_status(sub, currentCSV=csv, state="UpgradePending", installPlanRef={"name": plan, "namespace": ns},
                                conditions=[HEALTHY])
                continue
            if st.get("installedCSV"):
                continue
            if not api.get(f"{OPS}/{ns}/installplans/{plan}")["spec"]["approved"]:
                continue
            path = f"{OPS}/{ns}/clusterserviceversions/{csv}"
            have = api.get(path)
            if have is None:
                for c in package["crds"]:
                    api.install_crd(c)
                api.ok("POST", f"{OPS}/{ns}/clusterserviceversions", {
                    "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                    "metadata": {"name": csv, "namespace": ns},
                    "spec": {"displayName": spec["name"], "version": package["version"],
                             "install": {"strategy": "deployment", "spec": {"deployments": []}}}})
                first = (FAILED if self.csv_outcome in ("Failed", "FailedOnce") else INSTALLING)
                api.patch_status(path, first)
            elif have.get("status", {}).get("phase") == "Failed" and self.csv_outcome == "FailedOnce" \
                    and self._role_read(csv):
                # OLM retries a Failed CSV: transitionCSVState's CSVPhaseFailed case re-checks the install
                # (updateInstallStatus) and moves it back to Pending with NeedsReinstall, then on to
                # Installing. The role, having seen Failed once, must keep waiting.
                self._read_csvs.discard(csv)
                api.patch_status(path, INSTALLING)
            elif have.get("status", {}).get("phase") == "Installing" and self._role_read(csv):
                api.patch_status(path, SUCCEEDED)
                upgrade = ({"currentCSV": f"{spec['name']}.v9.0.0", "installPlanRef": {"name": f"{plan}-upgrade", "namespace": ns}}
                           if manual else {"state": "AtLatestKnown"})
                self.sub_status(sub, **{"installedCSV": csv, "state": "UpgradePending", **upgrade})

    @staticmethod
    def _unresolvable(spec: dict, sub: str) -> str:
        """OLM's resolution failure for a package, channel or source the catalogs do not have, or ''
        (pkg/controller/registry/resolver: "no operators found ...")."""
        name, channel, source = spec["name"], spec.get("channel"), spec["source"]
        where = f"in the catalog referenced by subscription {sub}"
        if channel == UNKNOWN_CHANNEL:
            return f"constraints not satisfiable: no operators found in channel {channel} of package {name} {where}"
        if name in TEST_PACKAGES:
            return ""
        package = CATALOG.get(name)
        if package is None or package["source"] != source:
            return f"constraints not satisfiable: no operators found in package {name} {where}"
        if channel and channel not in package["channels"]:
            return f"constraints not satisfiable: no operators found in channel {channel} of package {name} {where}"
        return ""

    def _plan(self, name: str, csv: str, approved: bool):
        if self.api.get(f"{OPS}/{self.ns}/installplans/{name}") is None:
            self.api.ok("POST", f"{OPS}/{self.ns}/installplans", {
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {"approval": "Automatic" if approved else "Manual", "approved": approved,
                         "clusterServiceVersionNames": [csv]}})
            self.api.patch_status(f"{OPS}/{self.ns}/installplans/{name}",
                                  {"phase": "Complete" if approved else "RequiresApproval", "catalogSources": []})
