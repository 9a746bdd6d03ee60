//! The I/O half: CSR approval, waiting for Ready, cordon, eviction, Node deletion — all through
//! `kube_client` (its retries, waiting and discovery).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube_client::objects::{conditions, known};
use kube_client::{Client, KubeError, PatchType, Poll, Resource, WaitError};
use serde_json::{json, Value};

use crate::csr::{decide, held_back, Csr, Expected, Holds, Verdict, MAX_CLOCK_SKEW};
use crate::pods::{classify, covering_budgets, key, node_unreachable, skip_wait, PodClass};

/// The grace period of a pod evicted from an unreachable node (Cluster API and OpenShift Machine API drain).
const UNREACHABLE_GRACE: i64 = 1;

/// What [`Run::evict_all`] did: the pods evicted, those left `Terminating` on an unreachable node,
/// and on failure what is left and why.
struct Evicted {
    evicted: Vec<String>,
    left_terminating: Vec<String>,
    result: Result<(), Vec<String>>,
}

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[derive(Debug, thiserror::Error)]
pub enum NodesError {
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: Box<KubeError>,
    },
    #[error("refused, nothing approved: {} claim an expected node but fail its checks: {}", .0.len(), .0.join("; "))]
    Refused(Vec<String>),
    #[error("draining node {node} did not finish within drain_timeout: {}; node {node} {}{}", .blocked.join("; "),
        if *.uncordoned { "is schedulable again (uncordoned)" } else { "stays cordoned, as it was before" },
        if .evicted.is_empty() { String::new() } else { format!("; evicted before the timeout: {}", .evicted.join(", ")) })]
    Blocked {
        node: String,
        blocked: Vec<String>,
        evicted: Vec<String>,
        uncordoned: bool,
    },
    #[error("Node {0} does not exist")]
    NoNode(String),
    #[error(
        "Node {0} is a control-plane node; draining or removing it needs allow_control_plane=true"
    )]
    ControlPlane(String),
    #[error("nodes not Ready after {waited}s: {pending}")]
    NotReady { waited: u64, pending: String },
    /// The run lost the cluster's lease while waiting (kube_client::STOP_FILE_ENV).
    #[error("stopped waiting for the nodes after {waited}s: {reason}")]
    Stopped { waited: u64, reason: String },
    #[error("the API server lists no pods/eviction subresource in /api/v1")]
    NoEviction,
}

fn kube(what: impl Into<String>) -> impl FnOnce(KubeError) -> NodesError {
    let what = what.into();
    move |source| NodesError::Kube {
        what,
        source: Box::new(source),
    }
}

/// One module run against one cluster, with what it did so far.
pub struct Run {
    pub client: Client,
    pub check: bool,
    pub interval: Duration,
    pub expected: Expected,
    pub allow_control_plane: bool,
    /// Seconds after a pod's `deletionTimestamp` from which a drain stops waiting for it when its
    /// node is unreachable (`skip_wait_for_delete_timeout`).
    pub skip_wait_for_delete: u64,
    /// CSRs approved (or, in check mode, that would be).
    pub approved: Vec<Value>,
    /// Pending CSRs that are not for an expected node, by name.
    pub unexpected: BTreeMap<String, Value>,
    /// Pending CSRs of expected nodes held back (stale, or not the node's newest client CSR), by name.
    pub skipped: BTreeMap<String, Value>,
    eviction: Option<(String, String)>,
}

impl Run {
    pub fn new(client: Client, check: bool, interval: Duration, expected: Expected) -> Run {
        Run {
            client,
            check,
            interval,
            expected,
            allow_control_plane: false,
            skip_wait_for_delete: 1,
            approved: Vec::new(),
            unexpected: BTreeMap::new(),
            skipped: BTreeMap::new(),
            eviction: None,
        }
    }

    /// One look at the pending CSRs: approve those of the expected nodes; fail, approving nothing,
    /// when one claims an expected node but fails its checks. The number approved.
    pub fn approve_pass(&mut self) -> Result<usize, NodesError> {
        let r = known::certificate_signing_requests();
        let all = self
            .client
            .list(&r, None, None)
            .map_err(kube("listing CertificateSigningRequests"))?;
        let mut todo = Vec::new();
        let mut refused = Vec::new();
        let judged: Vec<(Csr, Verdict)> = all
            .iter()
            .map(|obj| {
                let csr = Csr::from_object(obj);
                let v = decide(&csr, &self.expected);
                (csr, v)
            })
            .collect();
        let holds = Holds::new(
            judged.iter().map(|(c, v)| (c, v)),
            self.existing_nodes()?,
            &self.expected.started,
        );
        for (csr, verdict) in judged {
            if csr.decided.is_some() {
                continue;
            }
            match verdict {
                Verdict::Approve { node, kind } => match held_back(&csr, &node, kind, &holds) {
                    None => todo.push((csr.name, node, kind)),
                    Some(reason) => {
                        self.skipped.insert(
                                csr.name.clone(),
                                json!({"name": csr.name, "node": node, "kind": kind.as_str(), "reason": reason}),
                            );
                    }
                },
                Verdict::Refused { node, reason } => refused.push(format!(
                    "CSR {} ({}, for node {node}): {reason}",
                    csr.name, csr.signer
                )),
                Verdict::Unexpected { reason } => {
                    self.unexpected.insert(
                        csr.name.clone(),
                        json!({"name": csr.name, "signer": csr.signer, "username": csr.username, "reason": reason}),
                    );
                }
            }
        }
        if !refused.is_empty() {
            return Err(NodesError::Refused(refused));
        }
        let mut n = 0;
        for (name, node, kind) in todo {
            if !self.check && !self.approve(&name, &node)? {
                continue; // decided meanwhile by someone else
            }
            n += 1;
            self.unexpected.remove(&name);
            self.skipped.remove(&name);
            self.approved
                .push(json!({"name": name, "node": node, "kind": kind.as_str()}));
        }
        Ok(n)
    }

    /// The expected nodes that have a Node object (joined already).
    fn existing_nodes(&self) -> Result<BTreeSet<String>, NodesError> {
        let all = self
            .client
            .list(&known::nodes(), None, None)
            .map_err(kube("listing Nodes"))?;
        let mut out = BTreeSet::new();
        for node in &all {
            let Some(name) = node.pointer("/metadata/name").and_then(Value::as_str) else {
                continue;
            };
            let started = self.expected.started.get(name).copied();
            let rejoining = self.expected.rejoin && !kubelet_reports_ready(node, started);
            if self.expected.nodes.contains_key(name) && !rejoining {
                out.insert(name.to_string());
            }
        }
        Ok(out)
    }

    /// Add the `Approved` condition through the `approval` subresource (certificates.k8s.io/v1), as
    /// `oc adm certificate approve` does; on a conflict read it again (it may have been decided).
    /// `false` when it is gone or was decided by someone else meanwhile.
    fn approve(&self, name: &str, node: &str) -> Result<bool, NodesError> {
        let r = known::certificate_signing_requests();
        let what = format!("approving CertificateSigningRequest {name}");
        let mut last_conflict = None;
        for _ in 0..3 {
            let Some(mut obj) = self.client.get(&r, None, name).map_err(kube(&what))? else {
                return Ok(false);
            };
            if Csr::from_object(&obj).decided.is_some() {
                return Ok(false);
            }
            let cond = json!({"type": "Approved", "status": "True", "reason": "ProxShiftApproved",
                "message": format!("approved by proxshift.openshift.cluster_nodes for node {node}")});
            match obj
                .pointer_mut("/status/conditions")
                .and_then(Value::as_array_mut)
            {
                Some(list) => list.push(cond),
                None => obj["status"] = json!({"conditions": [cond]}),
            }
            match self
                .client
                .replace_subresource(&r, None, name, "approval", &obj)
            {
                Ok(_) => return Ok(true),
                Err(e) if e.is_conflict() => last_conflict = Some(e),
                Err(e) => return Err(kube(&what)(e)),
            }
        }
        match last_conflict {
            Some(e) => Err(kube(&what)(e)),
            None => Ok(false),
        }
    }

    /// Wait until every node in `names` exists and is `Ready=True` (approving their CSRs on each
    /// look with `approve`). In check mode: one look. Per node: `{name, ready}`.
    pub fn wait_ready(
        &mut self,
        names: &[String],
        timeout: Duration,
        approve: bool,
    ) -> Result<Vec<Value>, NodesError> {
        let timeout = if self.check { Duration::ZERO } else { timeout };
        let interval = self.interval;
        let mut last: Vec<Value> = Vec::new();
        let res = kube_client::wait_for(timeout, interval, || {
            if approve {
                self.approve_pass()?;
            }
            let mut pending = Vec::new();
            last.clear();
            for n in names {
                let node = self
                    .client
                    .get(&known::nodes(), None, n)
                    .map_err(kube(format!("reading Node {n}")))?;
                let started = self.expected.started.get(n).copied();
                let why = match &node {
                    None => Some(format!("{n}: not registered")),
                    Some(obj) if stale_ready(obj, started) => Some(format!(
                        "{n}: Ready=True last reported before its VM started (stale: its kubelet has not reported since)"
                    )),
                    Some(obj) => conditions(obj)
                        .into_iter()
                        .find(|c| c.type_ == "Ready")
                        .filter(|c| c.status == "True")
                        .is_none()
                        .then(|| format!("{n}: {}", ready_text(obj))),
                };
                last.push(json!({"name": n, "exists": node.is_some(), "ready": why.is_none()}));
                pending.extend(why);
            }
            Ok(if pending.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending(pending.join(", "))
            })
        });
        match res {
            Ok(()) => Ok(last),
            Err(WaitError::Failed(e)) => Err(e),
            Err(WaitError::Timeout { .. }) if self.check => Ok(last),
            Err(WaitError::Timeout { waited, pending }) => Err(NodesError::NotReady {
                waited: waited.as_secs(),
                pending,
            }),
            Err(WaitError::Stopped { waited, reason }) => Err(NodesError::Stopped {
                waited: waited.as_secs(),
                reason,
            }),
        }
    }

    /// Cordon `name` and evict its pods (but DaemonSet and mirror pods), waiting for them to be gone.
    /// A drain that does not finish within `timeout` uncordons the node again (when this run
    /// cordoned it) and fails naming the pods and what blocked them.
    pub fn drain(&mut self, name: &str, timeout: Duration) -> Result<Value, NodesError> {
        let node = self
            .client
            .get(&known::nodes(), None, name)
            .map_err(kube(format!("reading Node {name}")))?
            .ok_or_else(|| NodesError::NoNode(name.into()))?;
        if is_control_plane(&node) && !self.allow_control_plane {
            return Err(NodesError::ControlPlane(name.into()));
        }
        let cordoned_before = node.pointer("/spec/unschedulable") == Some(&json!(true));
        // Cordon first, then list (kubectl drain: RunCordonOrUncordon before GetPodsForDeletion), so no
        // pod scheduled in between stays on the node. In check mode the list is the prediction.
        if !self.check && !cordoned_before {
            self.set_unschedulable(name, true)?;
        }
        let pods = match self.pods_on(name) {
            Ok(p) => p,
            Err(e) => return Err(self.undo_cordon(name, cordoned_before, e)),
        };
        let (evict, kept): (Vec<Value>, Vec<Value>) = pods
            .into_iter()
            .partition(|p| classify(p) == PodClass::Evict);
        let evict_keys: Vec<String> = evict.iter().map(key).collect();
        let kept_keys: Vec<String> = kept.iter().map(key).collect();
        let mut report = json!({"name": name, "cordon": !cordoned_before, "evict": evict_keys,
            "kept": kept_keys, "deleted": false});
        if self.check || evict.is_empty() {
            report["evicted"] = json!([]);
            report["left_terminating"] = json!([]);
            return Ok(report);
        }
        let out = self.evict_all(name, evict, timeout);
        if let Err(blocked) = out.result {
            let e = NodesError::Blocked {
                node: name.into(),
                blocked,
                evicted: out.evicted,
                uncordoned: !cordoned_before,
            };
            return Err(self.undo_cordon(name, cordoned_before, e));
        }
        let evicted = out.evicted;
        report["left_terminating"] = json!(out.left_terminating);
        report["evicted"] = json!(evicted);
        Ok(report)
    }

    fn set_unschedulable(&self, name: &str, on: bool) -> Result<(), NodesError> {
        self.client
            .patch(
                &known::nodes(),
                None,
                name,
                &json!({"spec": {"unschedulable": on}}),
                PatchType::Merge,
            )
            .map(drop)
            .map_err(kube(format!(
                "{} node {name}",
                if on { "cordoning" } else { "uncordoning" }
            )))
    }

    fn pods_on(&self, name: &str) -> Result<Vec<Value>, NodesError> {
        self.client
            .list_selected(
                &known::pods(),
                None,
                None,
                Some(&format!("spec.nodeName={name}")),
            )
            .map_err(kube(format!("listing the pods on node {name}")))
    }

    /// A failed drain gives the node back as it was: uncordoned when this run cordoned it.
    fn undo_cordon(&self, name: &str, cordoned_before: bool, e: NodesError) -> NodesError {
        if self.check || cordoned_before {
            return e;
        }
        match self.set_unschedulable(name, false) {
            Ok(()) => e,
            Err(undo) => undo,
        }
    }

    /// Whether `name`'s kubelet is unreachable now (see [`node_unreachable`]); a Node gone counts as
    /// unreachable (its pods are the pod garbage collector's).
    fn unreachable(&self, name: &str) -> Result<bool, KubeError> {
        Ok(self
            .client
            .get(&known::nodes(), None, name)?
            .is_none_or(|n| node_unreachable(&n)))
    }

    /// Evict `pods` until all are gone or `timeout` passes; a 429 (a PodDisruptionBudget allows no
    /// disruption now) is tried again each poll. An evicted pod still `Terminating` on a node whose
    /// kubelet is unreachable is no longer waited for once `skip_wait_for_delete` seconds have passed
    /// since its `deletionTimestamp` (the end of its grace period): no kubelet will ever confirm it
    /// (k8s.io/kubectl `pkg/drain/filters.go` `shouldSkipPod`, set for unreachable nodes by Cluster
    /// API's Machine controller `drainNode`). On an unreachable node the pods are evicted with a grace
    /// period of 1 s (`deleteOptions.gracePeriodSeconds`), as that `drainNode` and the OpenShift Machine
    /// API's drain controller (openshift/machine-api-operator `pkg/controller/drain/drain_controller.go`)
    /// do: the `deletionTimestamp` is then a second away, not a pod's own grace period (an hour, for
    /// some), so a dead node's pods cannot outlast the drain.
    fn evict_all(&mut self, node: &str, pods: Vec<Value>, timeout: Duration) -> Evicted {
        let mut out = Evicted {
            evicted: Vec::new(),
            left_terminating: Vec::new(),
            result: Ok(()),
        };
        let (version, kind) = match self.eviction_kind() {
            Ok(k) => k,
            Err(e) => {
                out.result = Err(vec![e.to_string()]);
                return out;
            }
        };
        // The poll is the retry: one attempt per pod per look.
        self.client.set_backoff(kube_client::Backoff::none());
        let mut left: Vec<(Value, Option<String>, bool)> =
            pods.into_iter().map(|p| (p, None, false)).collect();
        let interval = self.interval;
        let res = kube_client::wait_for(timeout, interval, || {
            let unreachable = self.unreachable(node)?;
            for (pod, why, requested) in left.iter_mut().filter(|(_, _, r)| !*r) {
                let (ns, name) = ns_name(pod);
                let mut body = json!({"apiVersion": version, "kind": kind,
                    "metadata": {"name": name, "namespace": ns}});
                if unreachable {
                    body["deleteOptions"] = json!({"gracePeriodSeconds": UNREACHABLE_GRACE});
                }
                match self.client.create_subresource(
                    &known::pods(),
                    Some(&ns),
                    &name,
                    "eviction",
                    &body,
                ) {
                    Ok(_) => {
                        *requested = true;
                        out.evicted.push(key(pod));
                    }
                    Err(e) if e.is_not_found() => *requested = true,
                    Err(e) if e.status() == Some(429) => *why = Some(self.blocked_by(pod, &e)),
                    Err(e) if e.is_transport() || e.status().is_some_and(|s| s >= 500) => {
                        *why = Some(e.to_string())
                    }
                    Err(e) => return Err(e),
                }
            }
            let now = unix_now();
            let mut still = Vec::new();
            for (pod, why, requested) in left.drain(..) {
                let (ns, name) = ns_name(&pod);
                let current = match requested {
                    true => self.same_pod(&pod, &ns, &name)?,
                    false => Some(pod.clone()),
                };
                match current {
                    None => continue,
                    Some(p)
                        if requested
                            && unreachable
                            && skip_wait(&p, now, self.skip_wait_for_delete) =>
                    {
                        out.left_terminating.push(key(&pod));
                        continue;
                    }
                    Some(_) => still.push((pod, why, requested)),
                }
            }
            left = still;
            Ok(if left.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending(format!("{} pods", left.len()))
            })
        });
        self.client.set_backoff(kube_client::Backoff::default());
        out.result = match res {
            Ok(()) => Ok(()),
            Err(WaitError::Failed(e)) => Err(vec![e.to_string()]),
            Err(e @ WaitError::Stopped { .. }) => Err(vec![e.to_string()]),
            Err(WaitError::Timeout { .. }) => Err(left
                .iter()
                .map(|(pod, why, requested)| match (why, *requested) {
                    (_, true) => format!("pod {} was evicted but is still terminating", key(pod)),
                    (Some(w), false) => format!("pod {}: {w}", key(pod)),
                    (None, false) => format!("pod {}: not evicted", key(pod)),
                })
                .collect()),
        };
        out
    }

    /// The pod as it is now, when it is still the same pod (same uid).
    fn same_pod(&self, pod: &Value, ns: &str, name: &str) -> Result<Option<Value>, KubeError> {
        let uid = pod.pointer("/metadata/uid");
        Ok(self
            .client
            .get(&known::pods(), Some(ns), name)?
            .filter(|now| now.pointer("/metadata/uid") == uid))
    }

    /// What a 429 on `pod`'s eviction means: the budgets that cover it, or the API's message.
    fn blocked_by(&self, pod: &Value, e: &KubeError) -> String {
        let (ns, _) = ns_name(pod);
        let names = self
            .budget_resource()
            .and_then(|r| self.client.list(&r, Some(&ns), None).ok())
            .map(|pdbs| covering_budgets(pod, &pdbs))
            .unwrap_or_default();
        if names.is_empty() {
            format!("eviction refused with HTTP 429: {e}")
        } else {
            format!("blocked by PodDisruptionBudget {}", names.join(", "))
        }
    }

    /// The Eviction's apiVersion and kind as discovery lists `pods/eviction` (policy/v1beta1 on
    /// Kubernetes 1.20, policy/v1 from 1.22).
    fn eviction_kind(&mut self) -> Result<(String, String), NodesError> {
        if let Some(k) = &self.eviction {
            return Ok(k.clone());
        }
        let k = self
            .client
            .subresource_kind("v1", "pods/eviction")
            .map_err(kube("discovering the Eviction API"))?
            .ok_or(NodesError::NoEviction)?;
        self.eviction = Some(k.clone());
        Ok(k)
    }

    /// PodDisruptionBudgets: policy/v1 where served, policy/v1beta1 before Kubernetes 1.21.
    fn budget_resource(&self) -> Option<Resource> {
        ["policy/v1", "policy/v1beta1"]
            .iter()
            .find_map(|v| self.client.resolve(v, "PodDisruptionBudget").ok())
    }

    /// Drain, then delete the Node. `None` when it does not exist (nothing to do).
    pub fn remove(&mut self, name: &str, timeout: Duration) -> Result<Option<Value>, NodesError> {
        let exists = self
            .client
            .get(&known::nodes(), None, name)
            .map_err(kube(format!("reading Node {name}")))?;
        if exists.is_none() {
            return Ok(None);
        }
        let mut report = self.drain(name, timeout)?;
        if !self.check {
            self.client
                .delete(&known::nodes(), None, name)
                .map_err(kube(format!("deleting Node {name}")))?;
        }
        report["deleted"] = json!(true);
        Ok(Some(report))
    }
}

fn ns_name(pod: &Value) -> (String, String) {
    let s = |p: &str| {
        pod.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (s("/metadata/namespace"), s("/metadata/name"))
}

/// `node-role.kubernetes.io/master` or `…/control-plane` label.
pub fn is_control_plane(node: &Value) -> bool {
    node.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_some_and(|l| {
            l.contains_key("node-role.kubernetes.io/master")
                || l.contains_key("node-role.kubernetes.io/control-plane")
        })
}

/// A `Ready=True` the kubelet reported before its VM (re)started (`lastHeartbeatTime` earlier than `started`
/// less [`MAX_CLOCK_SKEW`]): what the API still holds from before a shutdown, until the node-lifecycle
/// controller marks it `Unknown` once the Lease has not been renewed for its grace period (kubernetes
/// `pkg/controller/nodelifecycle/node_lifecycle_controller.go`, `tryUpdateNodeHealth`). A booted kubelet
/// reports its status at once (`pkg/kubelet/kubelet_node_status.go`, `syncNodeStatus`), so only a heartbeat
/// since the start counts. Without a start time or a heartbeat there is nothing to tell: not stale.
pub fn stale_ready(node: &Value, started: Option<i64>) -> bool {
    let Some(started) = started else {
        return false;
    };
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
    let Some(ready) = ready.filter(|c| c["status"] == "True") else {
        return false;
    };
    ready["lastHeartbeatTime"]
        .as_str()
        .and_then(|t| crate::remediation::parse_time(t).ok())
        .is_some_and(|beat| beat < started - MAX_CLOCK_SKEW)
}

/// `Ready=True` reported since the VM started: its kubelet holds a working client certificate. With
/// `rejoin` (a restart after a shutdown), only such a node counts as joined; any other may bootstrap again.
pub fn kubelet_reports_ready(node: &Value, started: Option<i64>) -> bool {
    let ready = conditions(node)
        .into_iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    ready && !stale_ready(node, started)
}

fn ready_text(node: &Value) -> String {
    match conditions(node).into_iter().find(|c| c.type_ == "Ready") {
        None => "no Ready condition yet".into(),
        Some(c) => {
            let mut s = format!("Ready={}", c.status);
            if let Some(r) = c.reason {
                s.push_str(&format!(" ({r}"));
                if let Some(m) = c.message.filter(|m| !m.is_empty()) {
                    s.push_str(&format!(": {m}"));
                }
                s.push(')');
            }
            s
        }
    }
}

impl Run {
    /// Cordon (`unschedulable`) or uncordon each named node, as `oc adm cordon`/`uncordon` do: a merge
    /// patch of `spec.unschedulable`, sent only to the nodes not already so (none in check mode).
    /// Per node: `{name, cordoned_before, cordoned, changed}`.
    pub fn set_schedulable_all(
        &self,
        names: &[String],
        cordon: bool,
    ) -> Result<Vec<Value>, NodesError> {
        let mut out = Vec::new();
        for name in names {
            let node = self
                .client
                .get(&known::nodes(), None, name)
                .map_err(kube(format!("reading Node {name}")))?
                .ok_or_else(|| NodesError::NoNode(name.clone()))?;
            let before = node.pointer("/spec/unschedulable") == Some(&json!(true));
            let change = before != cordon;
            if change && !self.check {
                self.set_unschedulable(name, cordon)?;
            }
            out.push(json!({"name": name, "cordoned_before": before, "cordoned": cordon, "changed": change}));
        }
        Ok(out)
    }

    /// The kubelet CA's Secret (`shutdown::SIGNER_SECRET`), `None` when it does not exist.
    pub fn kubelet_signer(&self) -> Result<Option<Value>, NodesError> {
        use crate::shutdown::{SIGNER_NAMESPACE, SIGNER_SECRET};
        self.client
            .get(&known::secrets(), Some(SIGNER_NAMESPACE), SIGNER_SECRET)
            .map_err(kube(format!(
                "reading Secret {SIGNER_NAMESPACE}/{SIGNER_SECRET}"
            )))
    }
}

impl Run {
    /// Each named node's health as the remediation plan needs it: its Ready condition and for how long
    /// (from `lastTransitionTime`, against `now`), and whether it is a control-plane node (its labels,
    /// or `control_plane` for a Node that is gone).
    pub fn health(
        &self,
        names: &[String],
        control_plane: &[String],
        now: i64,
    ) -> Result<Vec<crate::remediation::NodeHealth>, NodesError> {
        use crate::remediation::{parse_time, NodeHealth, Ready};
        let mut out = Vec::new();
        for n in names {
            let node = self
                .client
                .get(&known::nodes(), None, n)
                .map_err(kube(format!("reading Node {n}")))?;
            let ready_cond = node.as_ref().and_then(|obj| {
                let c = obj.pointer("/status/conditions")?.as_array()?;
                c.iter().find(|c| c["type"] == "Ready").cloned()
            });
            let ready_for = ready_cond
                .as_ref()
                .and_then(|c| c["lastTransitionTime"].as_str())
                .and_then(|t| parse_time(t).ok())
                .map(|t| now.saturating_sub(t).max(0) as u64);
            out.push(NodeHealth {
                name: n.clone(),
                control_plane: control_plane.contains(n)
                    || node.as_ref().is_some_and(is_control_plane),
                ready: Ready::parse(ready_cond.as_ref().and_then(|c| c["status"].as_str())),
                ready_for,
                vm_running: None,
                reset_ago: None,
                node_age: node
                    .as_ref()
                    .and_then(|o| o.pointer("/metadata/creationTimestamp")?.as_str())
                    .and_then(|t| parse_time(t).ok())
                    .map(|t| now.saturating_sub(t).max(0) as u64),
                vm_uptime: None,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(status: &str, beat: Option<&str>) -> Value {
        let mut c = json!({"type": "Ready", "status": status, "lastTransitionTime": "2027-01-01T00:00:00Z"});
        if let Some(b) = beat {
            c["lastHeartbeatTime"] = json!(b);
        }
        json!({"metadata": {"name": "m0"}, "status": {"conditions": [c]}})
    }

    #[test]
    fn a_ready_reported_before_the_vm_started_is_stale() {
        let start = crate::remediation::parse_time("2027-01-10T00:00:00Z").unwrap();
        assert!(stale_ready(
            &node("True", Some("2027-01-01T00:00:00Z")),
            Some(start)
        ));
        // Within the clock skew, or after the start: the booted kubelet's own report.
        assert!(!stale_ready(
            &node("True", Some("2027-01-09T23:59:55Z")),
            Some(start)
        ));
        assert!(!stale_ready(
            &node("True", Some("2027-01-10T00:01:00Z")),
            Some(start)
        ));
        // Nothing to compare with, or not Ready anyway: not stale.
        assert!(!stale_ready(&node("True", None), Some(start)));
        assert!(!stale_ready(
            &node("True", Some("2027-01-01T00:00:00Z")),
            None
        ));
        assert!(!stale_ready(
            &node("Unknown", Some("2027-01-01T00:00:00Z")),
            Some(start)
        ));
    }

    #[test]
    fn only_a_kubelet_reporting_since_its_start_holds_a_client_certificate() {
        let start = crate::remediation::parse_time("2027-01-10T00:00:00Z").unwrap();
        assert!(kubelet_reports_ready(
            &node("True", Some("2027-01-10T00:01:00Z")),
            Some(start)
        ));
        // Down longer than its certificates: Unknown, or a Ready from before the shutdown.
        assert!(!kubelet_reports_ready(
            &node("Unknown", Some("2027-01-10T00:01:00Z")),
            Some(start)
        ));
        assert!(!kubelet_reports_ready(
            &node("True", Some("2027-01-01T00:00:00Z")),
            Some(start)
        ));
        assert!(!kubelet_reports_ready(
            &json!({"metadata": {"name": "m0"}}),
            None
        ));
    }
}
