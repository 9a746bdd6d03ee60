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

from standins.controller import FakeController
from kube_fixtures import KubeApi

OPS = "/apis/operators.coreos.com/v1alpha1/namespaces"
GROUPS = "/apis/operators.coreos.com/v1/namespaces"
MISSING_SOURCE = "no-such-catalog"
UNKNOWN_CHANNEL = "no-such-channel"
NOW = "2026-01-01T00:00:00Z"


def cond(t: str, s: str, reason: str, msg: str) -> dict:
    return {"type": t, "status": s, "reason": reason, "message": msg, "lastTransitionTime": NOW}


HEALTHY = cond("CatalogSourcesUnhealthy", "False", "AllCatalogSourcesHealthy", "all available catalogsources are healthy")
SUCCEEDED = {"phase": "Succeeded", "reason": "InstallSucceeded", "message": "install strategy completed"}


class FakeOlm(FakeController):
    """OLM's catalog and OLM operators, reduced to what a Subscription in `ns` leads to."""

    def __init__(self, api: KubeApi, ns: str, csv_outcome: str = "Succeeded", module_user: str = "kc-admin"):
        """`module_user`: who the role's modules are in the audit log (the kubeconfig's user)."""
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
            if spec.get("channel") == UNKNOWN_CHANNEL:
                msg = (f"constraints not satisfiable: no operators found in channel {UNKNOWN_CHANNEL} of package "
                       f"{spec['name']} in the catalog referenced by subscription {sub['metadata']['name']}")
                if not any(c["type"] == "ResolutionFailed" for c in st.get("conditions", [])):
                    self.sub_status(sub, conditions=[
                        HEALTHY, cond("ResolutionFailed", "True", "ConstraintsNotSatisfiable", msg)])
                continue
            csv = spec.get("startingCSV") or f"{spec['name']}.v1.0.0"
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
                api.ok("POST", f"{OPS}/{ns}/clusterserviceversions", {
                    "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                    "metadata": {"name": csv, "namespace": ns},
                    "spec": {"displayName": spec["name"], "version": "1.0.0",
                             "install": {"strategy": "deployment", "spec": {"deployments": []}}}})
                first = ({"phase": "Failed", "reason": "InstallCheckFailed",
                          "message": "install timeout: deployment demo-controller not available"}
                         if self.csv_outcome == "Failed" else {"phase": "Installing", "reason": "InstallWaiting",
                                                               "message": "installing: waiting for deployment"})
                api.patch_status(path, first)
            elif have.get("status", {}).get("phase") == "Installing" and self._role_read(csv):
                api.patch_status(path, SUCCEEDED)
                upgrade = ({"currentCSV": f"{spec['name']}.v9.0.0", "installPlanRef": {"name": f"{plan}-upgrade", "namespace": ns}}
                           if manual else {"state": "AtLatestKnown"})
                self.sub_status(sub, **{"installedCSV": csv, "state": "UpgradePending", **upgrade})

    def _plan(self, name: str, csv: str, approved: bool):
        if self.api.get(f"{OPS}/{self.ns}/installplans/{name}") is None:
            self.api.ok("POST", f"{OPS}/{self.ns}/installplans", {
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {"approval": "Automatic" if approved else "Manual", "approved": approved,
                         "clusterServiceVersionNames": [csv]}})
            self.api.patch_status(f"{OPS}/{self.ns}/installplans/{name}",
                                  {"phase": "Complete" if approved else "RequiresApproval", "catalogSources": []})
