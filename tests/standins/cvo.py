"""The cluster-version operator's part, played against a test kube-apiserver (kube_fixtures.KubeApi) for
the cluster_upgrade tests: offer each channel's updates, and on seeing `spec.desiredUpdate` add a Partial
history entry, move the ClusterOperators' `operator` versions over one at a time, then complete the entry
(openshift/api `config/v1/types_cluster_version.go`: the newest history entry first, Partial while applied).

The fake advances one step only after the module has looked again — read from the API server's audit log,
by the module's user: a poll of the update ends with its LIST of the ClusterOperators, a look for a new
channel's offers is one GET of the ClusterVersion — so every state is seen by at least one poll whatever
the machine's speed. The fake itself authenticates as another user and never LISTs ClusterOperators while
the module runs.
"""
from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from kube_fixtures import KubeApi, condition

CV = "/apis/config.openshift.io/v1/clusterversions"
CO = "/apis/config.openshift.io/v1/clusteroperators"
MCP = "/apis/machineconfiguration.openshift.io/v1/machineconfigpools"


POOLS_UPDATING = "One or more machine config pools are updating, please see `oc get mcp` for further details"


def now(offset: int = 0) -> str:
    """A condition's lastTransitionTime `offset` seconds from now."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset))


def image(version: str) -> str:
    """A by-digest release image for `version` (made up, stable per version)."""
    return f"quay.io/openshift-release-dev/ocp-release@sha256:{version.replace('.', '0'):0>64}"


def releases(*versions: str) -> list[dict]:
    return [{"version": v, "image": image(v)} for v in versions]


def conditions(progressing: str | None = None, message: str = "Cluster version is settled",
               upgradeable: str | None = None) -> list[dict]:
    """ClusterVersion conditions: Available, Failing=False, Progressing (True with `progressing` as its
    message), RetrievedUpdates, and Upgradeable=False (AdminAckRequired) when `upgradeable` is given."""
    out = [condition("Available", "True", message), condition("Failing", "False"),
           condition("Progressing", "True" if progressing else "False", progressing or message),
           condition("RetrievedUpdates", "True")]
    if upgradeable:
        out.append({**condition("Upgradeable", "False", upgradeable), "reason": "AdminAckRequired"})
    return out


@contextmanager
def cluster_at(api: KubeApi, version: str) -> Iterator[None]:
    """The ClusterVersion of a settled cluster at `version` (what `oc adm node-image` reads first, and
    scale.yaml's version gate); the one found before (other tests of the session) is put back after."""
    saved = api.get(f"{CV}/version")

    def put(obj: dict | None) -> None:
        if api.get(f"{CV}/version") is not None:
            api.ok("DELETE", f"{CV}/version")
        if obj is None:
            return
        api.ok("POST", CV, {"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
                            "metadata": {"name": "version"}, "spec": obj.get("spec", {})})
        if obj.get("status"):
            api.patch_status(f"{CV}/version", obj["status"])

    put({"spec": {"clusterID": "6c1f5a2e-0000-4000-8000-0000000034ab", "channel": f"stable-{version.rsplit('.', 1)[0]}"},
         "status": {"desired": {"version": version, "image": image(version)}, "observedGeneration": 1,
                    "versionHash": "x", "availableUpdates": [],
                    "history": [{"state": "Completed", "version": version, "image": image(version), "verified": False,
                                 "startedTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T01:00:00Z"}],
                    "conditions": conditions()}})
    try:
        yield
    finally:
        put(saved)


def set_version(api: KubeApi, version: str) -> None:
    """Move the ClusterVersion of `cluster_at` to another settled `version`."""
    replace_status(api, {"desired": {"version": version, "image": image(version)},
                         "history": [{"state": "Completed", "version": version, "image": image(version), "verified": False,
                                      "startedTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T01:00:00Z"}]})


def replace_status(api: KubeApi, fields: dict, token: str | None = None) -> None:
    """Set `fields` of the ClusterVersion's status with a PUT of the whole status: a merge patch would drop
    the null `completionTime` of a Partial history entry, a key the schema requires."""
    status, cv = api.request("GET", f"{CV}/version", token=token)
    assert status == 200, cv
    cv["status"].update(fields)
    status, out = api.request("PUT", f"{CV}/version/status", cv, token=token)
    assert status == 200, out


class Audit:
    """One user's requests, from the API server's audit log (written before each answer: blocking mode)."""

    def __init__(self, api: KubeApi, user: str):
        self.path = Path(api.info["dir"]) / "audit.log"
        self.user = user

    def events(self) -> list[dict]:
        out = []
        for line in self.path.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line being written
            if e.get("user", {}).get("username") == self.user:
                out.append(e)
        return out

    def count(self, verb: str, resource: str, since: int = 0) -> int:
        return sum(1 for e in self.events()[since:]
                   if e["verb"] == verb and e.get("objectRef", {}).get("resource") == resource)

    def writes(self, since: int) -> list[str]:
        return [f"{e['verb']} {e['requestURI']}" for e in self.events()[since:]
                if e["verb"] in ("create", "update", "patch", "delete")]


class FakeCVO(threading.Thread):
    """Plays the cluster-version operator for `ClusterVersion version`; `offers` per channel.

    An offer of a channel is a list (the same whatever the version), or per version the list of updates from
    it — the update graph's edges from the current release, as `syncAvailableUpdates` publishes them.
    `conditional` per channel: the `status.conditionalUpdates` published with the offers (each a release and
    its risks; `Recommended=False`), as `pkg/cvo/availableupdates.go` (`syncAvailableUpdates`) evaluates them.
    `reject` maps versions to a failure: a desired update to one of them is not applied — the payload cannot be
    retrieved or verified — and `ReleaseAccepted=False` (`RetrievePayload`) says why, as `pkg/cvo/sync_worker.go`
    (`loadUpdatedPayload`: "Retrieving payload failed version=%q image=%q failure=%v") reports it.
    `degrade` maps versions to a ClusterOperator that degrades during the update to them: the update starts
    (history `Partial`), the operator reports `Degraded=True` and never its new version, and the ClusterVersion
    says `Failing=True` (`ClusterOperatorDegraded`, "Cluster operator %s is degraded") with Progressing's
    "Unable to apply %s: wait has exceeded 40 minutes for these operators: %s" — what `pkg/cvo/status.go`
    (`convertErrorToProgressing`, `setDesiredReleaseAcceptedCondition`) and `lib/resourcebuilder` report once the
    sync worker gave up waiting: the CVO itself waited out the grace before Failing turns True — the operator has
    been `Degraded=True` for more than 40 minutes (its `lastTransitionTime`), past `oc adm upgrade status`'s
    `degradedErrorThreshold` (openshift/oc `pkg/cli/admin/upgrade/status/controlplane.go`, `coInsights`).
    `flap` maps versions to a ClusterOperator that is briefly `Available=False` mid-update, as operators are while
    their operands roll: the CVO reports `Failing=True` (`ClusterOperatorNotAvailable`, "Cluster operator %s is not
    available") with Progressing's "Unable to apply %s: ..." (`pkg/cvo/status.go`, an `UpdateEffectFail` error is
    not converted to progressing), for `FLAP_LOOKS` looks of the module, then the operator is back and the sync
    worker's retry (`pkg/cvo/sync_worker.go`) clears Failing and the update goes on.
    Every update is accepted the CVO's way: `ReleaseAccepted=Unknown` (`RetrievePayload`) while the payload is
    retrieved, then `True` (`PayloadLoaded`, "Payload loaded version=%q image=%q") — `pkg/cvo/status.go`
    `setDesiredReleaseAcceptedCondition`.
    With `pools_roll`, once an update completes the machine config pools roll it onto the nodes for `POOL_LOOKS`
    looks: the `machine-config` ClusterOperator (created if missing) says `Upgradeable=False` (`PoolUpdating`, "One
    or more machine config pools are updating, please see `oc get mcp` for further details", openshift/
    machine-config-operator `pkg/operator/status.go` `syncUpgradeableStatus`) and the ClusterVersion too
    (`pkg/cvo/upgradeable.go`, `clusterOperatorsUpgradeable`: "Cluster operator %s should not be upgraded between
    minor versions: %s"), which refuses a minor-version update meanwhile; the ClusterVersion's clears a look after
    the operator's (the CVO's upgradeable checks are throttled).
    With `pools_roll`, the MachineConfigPools that exist are the machine-config controller's too: at the end of each update every pool
    that is not paused rolls the new release onto its machines; a paused pool does not (openshift/
    machine-config-operator `pkg/controller/node/node_controller.go`, `syncMachineConfigPool`: a paused pool gets its
    status synced only), and once resumed it rolls the release the cluster is at then, in one go, `Updated=False`
    `Updating=True` for `POOL_LOOKS` looks of the module at the pools, then every machine updated and `Updated=True`
    (`pkg/controller/node/status.go`, `calculateStatus`: `observedGeneration`, the machine counts, the conditions).
    `pool_versions` has each pool's releases in order, `paused_at` each update's pools as paused or not."""

    FLAP_LOOKS = 3
    POOL_LOOKS = 3

    def __init__(self, api: KubeApi, offers: dict[str, list[dict]], *, module_user: str, token: str,
                 conditional: dict[str, list[dict]] | None = None, reject: dict[str, str] | None = None,
                 degrade: dict[str, str] | None = None, flap: dict[str, str] | None = None, pools_roll: bool = False):
        super().__init__(daemon=True)
        self.api, self.offers, self.token = api, offers, token
        self.conditional, self.reject, self.degrade = conditional or {}, reject or {}, degrade or {}
        self.flap, self.pools_roll = flap or {}, pools_roll
        self.audit = Audit(api, module_user)
        self.stop = threading.Event()
        self.channel: str | None = None
        self.updates: list[dict] = []  # each spec.desiredUpdate acted on
        self.pool_versions: dict[str, list[str]] = {}
        self.paused_at: dict[str, dict[str, bool]] = {}
        self.error: BaseException | None = None

    def run(self):
        try:
            while not self.stop.wait(0.05):
                self.step()
        except BaseException as e:  # raised by the test (stop_all)
            self.error = e

    def ready(self) -> "FakeCVO":
        """Start; return once the current channel's offers are published."""
        if self.pools_roll:
            current = self.api.get(f"{CV}/version")["status"]["desired"]["version"]
            self.pool_versions = {p["metadata"]["name"]: [current] for p in self.pools()}
        self.start()
        while self.channel is None and self.error is None:
            self.stop.wait(0.05)
        return self

    def after_next_look(self, verb: str = "list", resource: str = "clusteroperators") -> None:
        seen = self.audit.count(verb, resource)
        while not self.stop.wait(0.05):
            if self.audit.count(verb, resource) > seen:
                return

    def _ok(self, method: str, path: str, body=None, content_type: str = "application/json"):
        status, out = self.api.request(method, path, body, token=self.token, content_type=content_type)
        assert 200 <= status < 300, f"{method} {path}: HTTP {status}: {out}"
        return out

    def offered(self, channel: str, version: str, graph_only: bool = False) -> list[dict]:
        """The channel's updates from `version` (a static list: none once updated, unless `graph_only` is off)."""
        offers = self.offers.get(channel, [])
        if isinstance(offers, dict):
            return offers.get(version, [])
        return [] if graph_only else offers

    def status(self, path: str, status: dict) -> None:
        self._ok("PATCH", path + "/status", {"status": status}, "application/merge-patch+json")

    def step(self):
        cv = self._ok("GET", f"{CV}/version")
        channel = cv["spec"].get("channel", "")
        if channel != self.channel:
            if self.channel is not None:
                self.after_next_look("get", "clusterversions")  # the module sees the old offers once at least
            self.channel = channel
            self.status(f"{CV}/version", {"availableUpdates": self.offered(channel, cv["status"]["desired"]["version"]),
                                          "conditionalUpdates": self.conditional.get(channel, [])})
            return
        want = (cv["spec"].get("desiredUpdate") or {}).get("version")
        if not want or want == cv["status"]["desired"]["version"]:
            if self.pools_roll:
                self.sync_pools(cv["status"]["desired"]["version"])
            return
        if want in self.reject:
            accepted = [c for c in cv["status"]["conditions"] if c["type"] == "ReleaseAccepted"]
            if accepted and accepted[0]["status"] == "False":
                return
            self.updates.append(cv["spec"]["desiredUpdate"])
            failure = {**condition("ReleaseAccepted", "False",
                                   f'Retrieving payload failed version="{want}" image="{image(want)}" '
                                   f'failure={self.reject[want]}'), "reason": "RetrievePayload"}
            replace_status(self.api, {"conditions": [c for c in cv["status"]["conditions"]
                                                     if c["type"] != "ReleaseAccepted"] + [failure]}, self.token)
            return
        self.updates.append(cv["spec"]["desiredUpdate"])
        self.paused_at[want] = {p["metadata"]["name"]: bool(p["spec"].get("paused")) for p in self.pools()}
        operators = [o["metadata"]["name"] for o in self._ok("GET", CO)["items"]]
        old = cv["status"]["history"]
        old[0]["completionTime"] = old[0].get("completionTime") or "2026-01-02T00:00:00Z"
        self.after_next_look()
        partial = {"state": "Partial", "version": want, "image": image(want), "verified": True,
                   "startedTime": "2026-01-02T00:00:00Z", "completionTime": None}
        loading = {**condition("ReleaseAccepted", "Unknown", f'Retrieving payload version="{want}" image="{image(want)}"'),
                   "reason": "RetrievePayload", "lastTransitionTime": now()}
        replace_status(self.api, {"desired": {"version": want, "image": image(want)}, "history": [partial] + old,
                                  "conditions": conditions(progressing=f"Working towards {want}") + [loading]}, self.token)
        self.after_next_look()
        accepted = {**condition("ReleaseAccepted", "True", f'Payload loaded version="{want}" image="{image(want)}"'),
                    "reason": "PayloadLoaded", "lastTransitionTime": now()}
        working = conditions(progressing=f"Working towards {want}") + [accepted]
        replace_status(self.api, {"conditions": working}, self.token)
        if want in self.degrade:
            self.degraded(want, working)
            return
        for i, name in enumerate(operators):
            self.after_next_look()
            self.status(f"{CO}/{name}", {"versions": [{"name": "operator", "version": want}]})
            if i == 0 and want in self.flap:
                self.flapped(want, self.flap[want], working)
        self.after_next_look()
        done = {**partial, "state": "Completed", "completionTime": "2026-01-02T01:00:00Z"}
        settled = conditions(message=f"Cluster version is {want}") + [accepted]
        if self.pools_roll:
            self.pools_rolling(True)
            settled = settled + [self.not_upgradeable()]
        self.status(f"{CV}/version", {"history": [done] + old, "availableUpdates": self.offered(channel, want, graph_only=True),
                                      "conditions": settled})
        if self.pools_roll:
            for _ in range(self.POOL_LOOKS):
                self.after_next_look()
            for pool in self.pools():
                if not pool["spec"].get("paused"):
                    self.pool_versions.setdefault(pool["metadata"]["name"], []).append(want)
            # The operator first; the CVO's Upgradeable follows a look later (its checks are throttled).
            self.pools_rolling(False)
            self.after_next_look()
            self.status(f"{CV}/version", {"conditions": [c for c in settled if c["type"] != "Upgradeable"]})

    def flapped(self, want: str, name: str, working: list[dict]) -> None:
        """`name` is briefly Available=False: Failing=True for FLAP_LOOKS looks, then cleared by the retry."""
        at = now()
        gone = {**condition("Available", "False", f"{name} operand pods are rolling out"), "reason": "Rollout",
                "lastTransitionTime": at}
        self.status(f"{CO}/{name}", {"conditions": [gone, condition("Progressing", "True"), condition("Degraded", "False")]})
        failing = {**condition("Failing", "True", f"Cluster operator {name} is not available"),
                   "reason": "ClusterOperatorNotAvailable", "lastTransitionTime": at}
        progressing = {**condition("Progressing", "True", f"Unable to apply {want}: the cluster operator {name} is not "
                                                          "available"), "reason": "ClusterOperatorNotAvailable"}
        keep = [c for c in working if c["type"] not in ("Failing", "Progressing")]
        replace_status(self.api, {"conditions": keep + [failing, progressing]}, self.token)
        for _ in range(self.FLAP_LOOKS):
            self.after_next_look()
        back = {**condition("Available", "True"), "lastTransitionTime": now()}
        self.status(f"{CO}/{name}", {"conditions": [back, condition("Progressing", "False"), condition("Degraded", "False")]})
        replace_status(self.api, {"conditions": working}, self.token)

    def pools(self) -> list[dict]:
        """The MachineConfigPools (none where the API server does not serve them)."""
        status, out = self.api.request("GET", MCP, token=self.token)
        return out["items"] if status == 200 else []

    def pool_status(self, pool: dict, updated: bool) -> None:
        total = pool.get("status", {}).get("machineCount", 0)
        self.status(f"{MCP}/{pool['metadata']['name']}", {
            "observedGeneration": pool["metadata"]["generation"], "machineCount": total,
            "updatedMachineCount": total if updated else 0, "readyMachineCount": total if updated else 0,
            "unavailableMachineCount": 0 if updated else 1, "degradedMachineCount": 0,
            "conditions": [condition("Updated", "True" if updated else "False"),
                           condition("Updating", "False" if updated else "True"), condition("Degraded", "False")]})

    def sync_pools(self, current: str) -> None:
        """Each pool at `current` (the first look: where it is), a resumed one rolled onto it over POOL_LOOKS looks."""
        for pool in self.pools():
            versions = self.pool_versions.setdefault(pool["metadata"]["name"], [current])
            seen = pool.get("status", {}).get("observedGeneration") == pool["metadata"]["generation"]
            if pool["spec"].get("paused") or versions[-1] == current:
                if not seen:
                    self.pool_status(pool, updated=versions[-1] == current)
                continue
            self.pool_status(pool, updated=False)
            self.pools_rolling(True)
            for _ in range(self.POOL_LOOKS):
                self.after_next_look("get", "machineconfigpools")
            versions.append(current)
            self.pool_status(self._ok("GET", f"{MCP}/{pool['metadata']['name']}"), updated=True)
            self.pools_rolling(False)

    def pools_rolling(self, rolling: bool) -> None:
        """The machine-config ClusterOperator's Upgradeable: False (PoolUpdating) while the pools roll."""
        path = f"{CO}/machine-config"
        if self.api.get(path) is None:
            self._ok("POST", CO, {"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
                                  "metadata": {"name": "machine-config"}, "spec": {}})
        upgradeable = ({**condition("Upgradeable", "False", POOLS_UPDATING), "reason": "PoolUpdating"} if rolling
                       else {**condition("Upgradeable", "True"), "reason": "AsExpected"})
        self.status(path, {"conditions": [condition("Available", "True"), condition("Degraded", "False"),
                                          condition("Progressing", "True" if rolling else "False"), upgradeable]})

    @staticmethod
    def not_upgradeable() -> dict:
        return {**condition("Upgradeable", "False", "Cluster operator machine-config should not be upgraded between "
                                                    f"minor versions: {POOLS_UPDATING}"),
                "reason": "PoolUpdating", "lastTransitionTime": now()}

    def degraded(self, want: str, before: list[dict]) -> None:
        """The update to `want` stalls on `self.degrade[want]`: Degraded operator, then Failing=True (after one
        more look, so the module sees the update under way first)."""
        name = self.degrade[want]
        self.after_next_look()
        self.status(f"{CO}/{name}", {"conditions": [
            {**condition("Degraded", "True", "NodeInstallerDegraded: 1 nodes are failing on revision 12"),
             "reason": "NodeInstaller_InstallerPodFailed", "lastTransitionTime": now(-41 * 60)},
            condition("Available", "True"), condition("Progressing", "True")]})
        self.after_next_look()
        failing = {**condition("Failing", "True", f"Cluster operator {name} is degraded"), "reason": "ClusterOperatorDegraded",
                   "lastTransitionTime": now()}
        progressing = {**condition("Progressing", "True", f"Unable to apply {want}: wait has exceeded 40 minutes for these "
                                                          f"operators: {name}"), "reason": "ClusterOperatorDegraded"}
        keep = [c for c in before if c["type"] not in ("Failing", "Progressing")]
        replace_status(self.api, {"conditions": keep + [failing, progressing]}, self.token)

    def finish(self) -> None:
        self.stop.set()
        self.join(timeout=10)
        assert self.error is None, self.error
