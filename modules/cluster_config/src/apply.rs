//! The calls: per object a GET, a dry-run apply and (only when that shows a change, and never in
//! check mode) the apply; or a delete (a dry-run delete in check mode); or a read. Then the waits.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use kube_client::{wait_for, Client, KubeError, NotYet, Poll, Resolved, Resource, WaitError};
use serde_json::{json, Value};

use crate::error::ConfigError;
use crate::plan::{masked, masked_pair, resolve_namespace, summary, would_change, Target};
use crate::wait::{pending, Check};
use crate::Options;

pub struct Run<'a> {
    pub client: &'a Client,
    pub opts: &'a Options,
    pub check_mode: bool,
}

/// What happened to one object.
#[derive(Debug, Clone)]
pub struct ObjResult {
    pub origin: String,
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// created, updated, unchanged, deleted, absent, read, not_found.
    pub action: &'static str,
    pub changed: bool,
    /// The object as the server has it (or, in check mode, would have it), masked.
    pub object: Option<Value>,
    /// state=read without a name: every object of the kind, masked.
    pub items: Option<Vec<Value>>,
    /// What a wait still missed when it timed out.
    pub pending: Vec<String>,
    pub note: Option<String>,
    /// Check mode only: predicted without the server's dry run (kind or namespace not there yet).
    pub predicted: bool,
}

impl ObjResult {
    fn new(t: &Target, ns: Option<&str>, action: &'static str, changed: bool) -> Self {
        ObjResult {
            origin: t.origin.clone(),
            api_version: t.api_version.clone(),
            kind: t.kind.clone(),
            namespace: ns.map(str::to_string),
            name: t.name.clone(),
            action,
            changed,
            object: None,
            items: None,
            pending: Vec::new(),
            note: None,
            predicted: false,
        }
    }

    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "origin": self.origin, "api_version": self.api_version, "kind": self.kind,
            "namespace": self.namespace, "name": self.name, "action": self.action,
            "changed": self.changed, "object": self.object,
        });
        if let Some(items) = &self.items {
            v["objects"] = Value::Array(items.clone());
        }
        if !self.pending.is_empty() {
            v["pending"] = json!(self.pending);
        }
        if let Some(n) = &self.note {
            v["note"] = json!(n);
        }
        v
    }
}

pub struct Diff {
    pub header: String,
    pub before: Value,
    pub after: Value,
}

#[derive(Default)]
pub struct RunOutcome {
    pub results: Vec<ObjResult>,
    pub diffs: Vec<Diff>,
    pub error: Option<ConfigError>,
}

impl RunOutcome {
    pub fn changed(&self) -> bool {
        self.results.iter().any(|r| r.changed)
    }
    pub fn summary(&self, check_mode: bool) -> String {
        let actions: Vec<&str> = self.results.iter().map(|r| r.action).collect();
        let s = summary(&actions);
        let mut s = if check_mode && self.changed() {
            format!("{s} (check mode: server-side dry run, nothing stored)")
        } else {
            s
        };
        for r in self.results.iter().filter(|r| r.predicted) {
            let what = format!("{} {}", r.kind, r.name.as_deref().unwrap_or("*"));
            s.push_str(&format!(
                "; {} {what} {}",
                r.origin,
                r.note.as_deref().unwrap_or_default()
            ));
        }
        s
    }
}

fn kube(what: &str) -> impl FnOnce(KubeError) -> ConfigError + '_ {
    move |source| ConfigError::Kube {
        object: what.to_string(),
        source: Box::new(source),
    }
}

impl Run<'_> {
    /// Every object in order (state=absent: in reverse, so a namespace goes after what is in it),
    /// then the waits. Stops at the first failure, keeping what was done before it.
    pub fn all(&self, targets: &mut [Target], checks: &[Check]) -> RunOutcome {
        let mut out = RunOutcome::default();
        let mut order: Vec<usize> = (0..targets.len()).collect();
        if self.opts.state == "absent" {
            order.reverse();
        }
        let mut placed: HashMap<usize, (Resource, Option<String>)> = HashMap::new();
        let mut new_namespaces = HashSet::new();
        for i in order {
            let t = &mut targets[i];
            let resolved = self.client.resolve_pending(
                &t.api_version,
                &t.kind,
                self.check_mode,
                self.opts.installed_by.as_deref(),
            );
            let r = match resolved {
                Ok(Resolved::Served(r)) => r,
                // Check mode, and the kind comes with what installed_by names: predicted.
                Ok(Resolved::NotYet(why)) => {
                    let ns = t.namespace.clone().or_else(|| self.opts.namespace.clone());
                    out.results
                        .push(self.not_yet(t, ns.as_deref(), &why, &mut out.diffs));
                    continue;
                }
                Err(e) => {
                    out.error = Some(kube(&format!("{} ({})", t.origin, t.describe(None)))(e));
                    return out;
                }
            };
            let ns = resolve_namespace(t, r.namespaced, self.opts.namespace.as_deref());
            let t = &*t;
            let done = match self.opts.state.as_str() {
                "absent" => self.absent(t, &r, ns.as_deref(), &mut out.diffs),
                "read" => self.read(t, &r, ns.as_deref()),
                _ => self.present(t, &r, ns.as_deref(), &mut new_namespaces, &mut out.diffs),
            };
            match done {
                Ok(res) => out.results.push(res),
                Err(e) => {
                    out.error = Some(e);
                    return out;
                }
            }
            placed.insert(i, (r, ns));
        }
        if self.opts.state == "present" && !checks.is_empty() && !self.check_mode {
            self.wait(targets, &placed, checks, &mut out);
        }
        out
    }

    fn present(
        &self,
        t: &Target,
        r: &Resource,
        ns: Option<&str>,
        new_namespaces: &mut HashSet<String>,
        diffs: &mut Vec<Diff>,
    ) -> Result<ObjResult, ConfigError> {
        let what = format!("{} ({})", t.origin, t.describe(ns));
        let name = t.name.as_deref().unwrap_or_default();
        let o = self.opts;
        let current = self.client.get(r, ns, name).map_err(kube(&what))?;
        let apply = |dry_run| {
            self.client.apply_as(
                r,
                ns,
                name,
                &t.body,
                &o.field_manager,
                o.force_conflicts,
                dry_run,
            )
        };
        let predicted = match apply(true) {
            Ok(p) => p,
            // Check mode: a namespace this task would create does not exist, so the server cannot
            // dry-run what goes into it. Reported as a creation, unvalidated.
            Err(e)
                if self.check_mode
                    && e.is_not_found()
                    && ns.is_some_and(|n| new_namespaces.contains(n)) =>
            {
                let mut res = ObjResult::new(t, ns, "created", true);
                res.object = Some(masked(&t.body));
                res.note = Some(format!(
                    "not validated by the server: its namespace {} is created by this task",
                    ns.unwrap_or_default()
                ));
                diffs.push(self.diff(&what, &json!({}), &t.body));
                return Ok(res);
            }
            // Check mode: the namespace is made by what installed_by names (an operator, an
            // earlier step), so the server cannot dry-run what goes into it either.
            Err(e) if self.check_mode && e.is_not_found() => {
                let by = o.installed_by.as_deref();
                match self.client.namespace_pending(ns, true, by) {
                    Ok(Some(why)) => return Ok(self.not_yet(t, ns, &why, diffs)),
                    _ => return Err(kube(&what)(e)),
                }
            }
            Err(e) => return Err(kube(&what)(e)),
        };
        let changed = would_change(current.as_ref(), &predicted);
        let action = match (changed, current.is_some()) {
            (false, _) => "unchanged",
            (true, false) => "created",
            (true, true) => "updated",
        };
        if action == "created" && t.kind == "Namespace" && t.api_version == "v1" {
            new_namespaces.insert(name.to_string());
        }
        let object = if changed && !self.check_mode {
            apply(false).map_err(kube(&what))?
        } else {
            predicted
        };
        if changed {
            diffs.push(self.diff(&what, current.as_ref().unwrap_or(&json!({})), &object));
        }
        let mut res = ObjResult::new(t, ns, action, changed);
        res.object = Some(masked(&object));
        Ok(res)
    }

    /// Check mode: an object whose kind or namespace is not there yet, predicted without the server.
    /// A creation when applied (changed, its diff from nothing), not found when read, absent when
    /// deleted — what a real run would meet once the kind or namespace is there and the object not.
    fn not_yet(
        &self,
        t: &Target,
        ns: Option<&str>,
        why: &NotYet,
        diffs: &mut Vec<Diff>,
    ) -> ObjResult {
        let mut res = match self.opts.state.as_str() {
            "read" => ObjResult::new(t, ns, "not_found", false),
            "absent" => ObjResult::new(t, ns, "absent", false),
            _ => {
                diffs.push(self.diff(
                    &format!("{} ({})", t.origin, t.describe(ns)),
                    &json!({}),
                    &t.body,
                ));
                let mut res = ObjResult::new(t, ns, "created", true);
                res.object = Some(masked(&t.body));
                res
            }
        };
        res.note = Some(why.prediction());
        res.predicted = true;
        res
    }

    fn diff(&self, what: &str, before: &Value, after: &Value) -> Diff {
        let (before, after) = masked_pair(before, after);
        Diff {
            header: what.to_string(),
            before,
            after,
        }
    }

    fn absent(
        &self,
        t: &Target,
        r: &Resource,
        ns: Option<&str>,
        diffs: &mut Vec<Diff>,
    ) -> Result<ObjResult, ConfigError> {
        let what = format!("{} ({})", t.origin, t.describe(ns));
        let name = t.name.as_deref().unwrap_or_default();
        let Some(current) = self.client.get(r, ns, name).map_err(kube(&what))? else {
            return Ok(ObjResult::new(t, ns, "absent", false));
        };
        let deleted = self
            .client
            .delete_with(r, ns, name, self.check_mode)
            .map_err(kube(&what))?;
        if !deleted {
            return Ok(ObjResult::new(t, ns, "absent", false));
        }
        diffs.push(self.diff(&what, &current, &json!({})));
        let mut res = ObjResult::new(t, ns, "deleted", true);
        res.object = Some(masked(&current));
        Ok(res)
    }

    fn read(&self, t: &Target, r: &Resource, ns: Option<&str>) -> Result<ObjResult, ConfigError> {
        let what = format!("{} ({})", t.origin, t.describe(ns));
        match t.name.as_deref() {
            Some(name) => {
                let obj = self.client.get(r, ns, name).map_err(kube(&what))?;
                let action = if obj.is_some() { "read" } else { "not_found" };
                let mut res = ObjResult::new(t, ns, action, false);
                res.object = obj.as_ref().map(masked);
                Ok(res)
            }
            None => {
                // A list covers every namespace unless one is named.
                let list_ns = t.namespace.as_deref().or(self.opts.namespace.as_deref());
                let list_ns = if r.namespaced { list_ns } else { None };
                let items = self.client.list(r, list_ns, None).map_err(kube(&what))?;
                let mut res = ObjResult::new(t, list_ns, "read", false);
                res.items = Some(items.iter().map(masked).collect());
                Ok(res)
            }
        }
    }

    /// Poll every object that has checks until all meet them; on timeout each result names what its
    /// object still lacks (and the error all of them).
    fn wait(
        &self,
        targets: &[Target],
        placed: &HashMap<usize, (Resource, Option<String>)>,
        checks: &[Check],
        out: &mut RunOutcome,
    ) {
        let watched: Vec<(usize, Vec<&Check>)> = (0..targets.len())
            .map(|i| {
                (
                    i,
                    checks
                        .iter()
                        .filter(|c| c.applies_to(&targets[i]))
                        .collect::<Vec<_>>(),
                )
            })
            .filter(|(_, c)| !c.is_empty())
            .collect();
        let mut last: HashMap<usize, Vec<String>> = HashMap::new();
        let timeout = Duration::from_secs(self.opts.wait_timeout as u64);
        let interval = Duration::from_secs(self.opts.wait_interval as u64);
        let waited = wait_for(timeout, interval, || {
            let mut all = Vec::new();
            for (i, cs) in &watched {
                let t = &targets[*i];
                let (r, ns) = &placed[i];
                let name = t.name.as_deref().unwrap_or_default();
                let what = t.describe(ns.as_deref());
                let missing = match self
                    .client
                    .get(r, ns.as_deref(), name)
                    .map_err(kube(&what))?
                {
                    None => vec!["to exist".to_string()],
                    Some(obj) => pending(&obj, cs),
                };
                if !missing.is_empty() {
                    all.push(format!("{what}: {}", missing.join(", ")));
                }
                last.insert(*i, missing);
            }
            Ok::<_, ConfigError>(if all.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending(all.join("; "))
            })
        });
        match waited {
            Ok(()) => {}
            Err(WaitError::Timeout { waited, pending }) => {
                for (i, missing) in last {
                    out.results[i].pending = missing;
                }
                out.error = Some(ConfigError::WaitTimeout {
                    waited: waited.as_secs(),
                    pending,
                });
            }
            Err(WaitError::Failed(e)) => out.error = Some(e),
            Err(WaitError::Stopped { waited, reason }) => {
                out.error = Some(ConfigError::WaitStopped {
                    waited: waited.as_secs(),
                    reason,
                })
            }
        }
    }
}
