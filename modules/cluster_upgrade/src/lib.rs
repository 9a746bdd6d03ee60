//! `proxshift.openshift.cluster_upgrade`: Upgrade an OpenShift cluster through its ClusterVersion.
//!
//! One look at `ClusterVersion version` and the ClusterOperators decides ([`decide`]): at the target,
//! refused (lowering, an update under way, an unhealthy cluster, `Upgradeable=False` for a minor, a
//! path the cluster does not offer), or an update. The update sets `spec.channel` when it changes
//! (then waits `refresh_polls` looks for the cluster-version operator to offer the new channel's
//! updates), then `spec.desiredUpdate` as `oc adm upgrade --to` does (openshift/oc
//! `pkg/cli/admin/upgrade/upgrade.go`, `patchDesiredUpdate`: a merge patch), and waits for the history
//! to complete at the target, reporting the operators updated so far; a release the operator does not
//! accept (`ReleaseAccepted=False`) still there a poll later ends the wait, and so does a `Failing=True`
//! that is not transient ([`decide::stuck`]). Between the hops of `upgrade_path: auto` it waits for the
//! machine config pools ([`decide::pools_rolling`]); over more than one minor it is a Control Plane Only
//! update, the worker pools paused for the hops and resumed at the target ([`pools`]). A target
//! only in `conditionalUpdates` is refused naming its risks unless `accept_risks` names them all.
//! Connection, retries and the waiting are kube-client's.

pub mod decide;
pub mod pools;

use std::time::Duration;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome};
use decide::{Action, Plan, Refusal, Request, Target, Wish};
use kube_client::connect::{cluster_opts, ClusterOptions};
use kube_client::objects::known;
use kube_client::{Client, KubeError, PatchType, Poll, WaitError};
use serde::Deserialize;
use serde_json::{json, Value};

/// The module's options; the documentation stub `plugins/modules/cluster_upgrade.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    let mut opts = cluster_opts();
    opts.extend([
        Opt::str("version").required(),
        Opt::str("channel"),
        Opt::str("image"),
        Opt::bool("allow_explicit_image").default(false),
        Opt::list("accept_risks", ansible_module::Type::Str).default(json!([])),
        Opt::str("upgrade_path")
            .choices(&["direct", "auto"])
            .default("direct"),
        Opt::bool("wait").default(true),
        Opt::int("timeout").default(10800),
        Opt::int("poll_interval").default(30),
        Opt::int("refresh_polls").default(10),
        Opt::bool("pause_worker_pools").default(true),
    ]);
    ArgSpec::new(opts)
}

#[derive(Debug, Deserialize)]
struct Opts {
    #[serde(flatten)]
    conn: ClusterOptions,
    version: String,
    channel: Option<String>,
    image: Option<String>,
    allow_explicit_image: bool,
    accept_risks: Vec<String>,
    upgrade_path: String,
    wait: bool,
    timeout: i64,
    poll_interval: i64,
    refresh_polls: i64,
    pause_worker_pools: bool,
}

fn kube_fail(what: &str, e: KubeError) -> Failure {
    Failure::new(format!("{what}: {e}"))
}

/// Bad option combinations, each naming the option.
fn check_options(o: &Opts, req: &Request) -> Result<(), Failure> {
    if o.timeout < 0 || o.poll_interval < 1 || o.refresh_polls < 1 {
        return Err(Failure::new(
            "timeout must be >= 0, poll_interval >= 1 (seconds) and refresh_polls >= 1",
        ));
    }
    if o.channel.as_deref().is_some_and(|c| c.trim().is_empty()) {
        return Err(Failure::new(
            "channel must be a channel name such as stable-4.19, or left out",
        ));
    }
    match (&o.image, o.allow_explicit_image) {
        (None, true) => Err(Failure::new(
            "allow_explicit_image needs image (the release image to force)",
        )),
        (Some(_), _) if matches!(req, Request::Minor { .. }) => Err(Failure::new(
            "image needs an exact version (4.19.7), not a minor: the image is one release",
        )),
        (Some(i), _) if i.trim().is_empty() => Err(Failure::new("image must not be empty")),
        _ => Ok(()),
    }
}

/// What the run is about, for every result.
struct Run<'a> {
    client: &'a Client,
    o: &'a Opts,
    req: Request,
    interval: Duration,
}

impl Run<'_> {
    fn cluster_version(&self) -> Result<Value, Failure> {
        self.client
            .get(&known::cluster_versions(), None, "version")
            .map_err(|e| kube_fail("reading ClusterVersion version", e))?
            .ok_or_else(|| {
                Failure::new(
                    "no ClusterVersion 'version': this is not an OpenShift 4 cluster (or the install has not got that far)",
                )
            })
    }

    /// One look at `ClusterVersion version` while waiting (none: an empty object).
    fn look(&self) -> Result<Value, KubeError> {
        Ok(self
            .client
            .get(&known::cluster_versions(), None, "version")?
            .unwrap_or_default())
    }

    fn operators(&self) -> Result<Vec<Value>, KubeError> {
        self.client.list(&known::cluster_operators(), None, None)
    }

    fn patch_spec(&self, spec: Value, what: &str) -> Result<(), Failure> {
        self.client
            .patch(
                &known::cluster_versions(),
                None,
                "version",
                &json!({"spec": spec}),
                PatchType::Merge,
            )
            .map(|_| ())
            .map_err(|e| kube_fail(what, e))
    }

    /// After a channel change: look up to `refresh_polls` times for the target among the offers.
    fn target_after_channel(&self, from: &str) -> Result<Target, Failure> {
        let current = semver::Version::parse(from).map_err(|e| Failure::new(e.to_string()))?;
        let wish = self.wish();
        let mut polls = 0;
        let limit = self.o.refresh_polls;
        let found = kube_client::wait_for(
            Duration::from_secs(self.o.timeout as u64),
            self.interval,
            || {
                polls += 1;
                let cv = self.look()?;
                Ok::<_, KubeError>(match decide::resolve(&cv, &self.req, &current, &wish) {
                    Ok(t) => Poll::Ready(Ok(t)),
                    Err(r) if polls >= limit => Poll::Ready(self.hop(&cv, &current).ok_or(r)),
                    Err(r) => Poll::Pending(r.to_string()),
                })
            },
        );
        match found {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(r)) => Err(refused(&r, &self.req)),
            Err(WaitError::Timeout { pending, .. }) => Err(Failure::new(pending)),
            Err(WaitError::Failed(e)) => Err(kube_fail("reading ClusterVersion version", e)),
            Err(e @ WaitError::Stopped { .. }) => Err(Failure::new(e.to_string())),
        }
    }

    /// With `upgrade_path: auto`, the next hop the cluster offers towards the request.
    fn hop(&self, cv: &Value, current: &semver::Version) -> Option<Target> {
        if self.o.upgrade_path != "auto" {
            return None;
        }
        decide::next_hop(cv, &self.req, current).map(|r| Target {
            version: r.version,
            image: r.image,
            force: false,
        })
    }

    fn wish(&self) -> Wish {
        Wish {
            channel: self.o.channel.clone(),
            image: self.o.image.clone(),
            allow_explicit_image: self.o.allow_explicit_image,
            accept_risks: self.o.accept_risks.clone(),
        }
    }

    /// Wait for the update to `target` to complete; the distinct progress states seen, in order. A
    /// rejected release or `Failing=True` still there one poll after it was first seen ends the wait
    /// ([`decide::stuck`]): the operator will not get further by itself.
    fn wait_done(&self, target: &str, seen: &mut Vec<Value>) -> Result<(), Failure> {
        let mut before: Option<String> = None;
        let waited = kube_client::wait_for(
            Duration::from_secs(self.o.timeout as u64),
            self.interval,
            || {
                let cv = self.look()?;
                let ops = self.operators()?;
                let p = decide::progress(&cv, &ops, target);
                let j = p.to_json();
                if seen.last() != Some(&j) {
                    seen.push(j);
                }
                let stuck = (!p.done)
                    .then(|| decide::stuck(&cv, &ops, unix_now()))
                    .flatten();
                if let Some(s) = stuck.as_ref().filter(|s| before.as_ref() == Some(*s)) {
                    return Ok::<_, KubeError>(Poll::Ready(Err(s.clone())));
                }
                before = stuck;
                Ok(if p.done {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Pending(p.pending(target))
                })
            },
        );
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(stuck)) => Err(
                Failure::new(format!("the update to {target} stopped: {stuck}"))
                    .with("progress", json!(seen)),
            ),
            Err(WaitError::Timeout { waited, pending }) => Err(Failure::new(format!(
                "timed out after {}s waiting for the update: {pending}",
                waited.as_secs()
            ))
            .with("progress", json!(seen))),
            Err(WaitError::Failed(e)) => Err(kube_fail("following the update", e)),
            // The update goes on in the cluster; this run no longer follows it (another run holds the lease).
            Err(e @ WaitError::Stopped { .. }) => Err(Failure::new(format!(
                "no longer following the update to {target} (it goes on in the cluster): {e}"
            ))
            .with("progress", json!(seen))),
        }
    }

    /// After a hop of `upgrade_path: auto`: wait while the machine config pools roll it onto the nodes
    /// (the CVO refuses the next minor hop meanwhile, `Upgradeable=False` `PoolUpdating`).
    fn wait_pools(&self) -> Result<(), Failure> {
        let waited = kube_client::wait_for(
            Duration::from_secs(self.o.timeout as u64),
            self.interval,
            || {
                let cv = self.look()?;
                Ok::<_, KubeError>(match decide::pools_rolling(&cv, &self.operators()?) {
                    Some(why) => Poll::Pending(format!("the machine config pools: {why}")),
                    None => Poll::Ready(()),
                })
            },
        );
        match waited {
            Ok(()) => Ok(()),
            Err(WaitError::Timeout { waited, pending }) => Err(Failure::new(format!(
                "timed out after {}s waiting between the hops of upgrade_path auto for {pending}",
                waited.as_secs()
            ))),
            Err(WaitError::Failed(e)) => Err(kube_fail(
                "reading the ClusterVersion and ClusterOperators",
                e,
            )),
            Err(e @ WaitError::Stopped { .. }) => Err(Failure::new(format!(
                "stopped between the hops of upgrade_path auto: {e}"
            ))),
        }
    }

    fn pools(&self) -> Result<Vec<Value>, Failure> {
        self.client
            .list(&known::machine_config_pools(), None, None)
            .map_err(|e| kube_fail("listing the MachineConfigPools", e))
    }

    /// Pause (or resume) the pools `names` ([`pools::patch`]); nothing in check mode.
    fn set_paused(&self, names: &[String], pause: bool, check: bool) -> Result<(), Failure> {
        let verb = if pause { "pausing" } else { "resuming" };
        for n in names.iter().filter(|_| !check) {
            let body = pools::patch(pause, &self.req);
            self.client
                .patch(
                    &known::machine_config_pools(),
                    None,
                    n,
                    &body,
                    PatchType::Merge,
                )
                .map_err(|e| kube_fail(&format!("{verb} MachineConfigPool {n}"), e))?;
        }
        Ok(())
    }

    /// After resuming `names`: wait until each has rolled the new configuration onto its machines.
    fn wait_resumed(&self, names: &[String]) -> Result<(), Failure> {
        let waited = kube_client::wait_for(
            Duration::from_secs(self.o.timeout as u64),
            self.interval,
            || {
                for n in names {
                    let pool = self.client.get(&known::machine_config_pools(), None, n)?;
                    if let Some(why) = pool.as_ref().and_then(pools::rolling) {
                        return Ok::<_, KubeError>(Poll::Pending(why));
                    }
                }
                Ok(Poll::Ready(()))
            },
        );
        match waited {
            Ok(()) => Ok(()),
            Err(WaitError::Timeout { waited, pending }) => Err(Failure::new(format!(
                "the control plane is updated; timed out after {}s waiting for the resumed worker pools: {pending}",
                waited.as_secs()
            ))),
            Err(WaitError::Failed(e)) => Err(kube_fail("reading the MachineConfigPools", e)),
            Err(e @ WaitError::Stopped { .. }) => Err(Failure::new(format!(
                "the control plane is updated; stopped waiting for the resumed worker pools: {e}"
            ))),
        }
    }

    /// The last word: the ClusterVersion says the cluster is at `target`.
    fn final_check(&self, target: &str) -> Result<(), Failure> {
        let cv = self.cluster_version()?;
        decide::completed_at(&cv, target)
            .map_err(|e| Failure::new(format!("the update to {target} did not complete: {e}")))
    }
}

/// Seconds since the Unix epoch, for judging how long a condition has held.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn refused(r: &Refusal, req: &Request) -> Failure {
    let mut f = Failure::new(r.to_string()).with("requested", req.to_string());
    if let Refusal::NotOffered { offered, .. } = r {
        f = f.with("offered", json!(offered));
    }
    f
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Opts = m.options()?;
    let req = decide::parse_request(&o.version).map_err(|e| Failure::new(e.to_string()))?;
    check_options(&o, &req)?;
    let conn = kube_client::connect("cluster", &o.conn.params())
        .map_err(|e| Failure::new(e.to_string()))?;
    if let Some(t) = &conn.token {
        m.add_secret(t.clone());
    }
    if let Some(w) = conn.warning {
        m.warn(w);
    }
    let r = Run {
        client: &conn.client,
        o: &o,
        req,
        interval: Duration::from_secs(o.poll_interval as u64),
    };
    let mut hops: Vec<String> = Vec::new();
    let mut first_from: Option<String> = None;
    let mut paused: Vec<String> = Vec::new();
    loop {
        if !hops.is_empty() {
            r.wait_pools().map_err(|f| f.changed(true))?;
        }
        let cv = r.cluster_version()?;
        let ops = r
            .operators()
            .map_err(|e| kube_fail("listing the ClusterOperators", e))?;
        let plan = match decide::decide(&cv, &ops, &r.req, &r.wish()) {
            Ok(p) => p,
            Err(e @ Refusal::NotOffered { .. }) => hop_plan(&r, &cv, &ops)
                .ok_or_else(|| refused(&e, &r.req).changed(!hops.is_empty()))?,
            Err(e) => return Err(refused(&e, &r.req).changed(!hops.is_empty())),
        };
        first_from.get_or_insert_with(|| plan.from.clone());
        let at_target = plan.action == Action::AtTarget;
        if hops.is_empty() && !at_target && control_plane_only(&r, &plan) {
            paused = pools::to_pause(&r.pools()?);
            pool_diffs(m, &paused, true);
            r.set_paused(&paused, true, m.check_mode)?;
        }
        let before = json!({"channel": cv.pointer("/spec/channel"), "desiredUpdate": cv.pointer("/spec/desiredUpdate")});
        let mut out = carry_out(m, &r, plan, before).map_err(|f| {
            let c = f.changed || !hops.is_empty() || !paused.is_empty();
            // Paused pools stay so until the target is reached: a rerun resumes them.
            let mut f = f.changed(c);
            if paused.is_empty() {
                f
            } else {
                f.msg = format!(
                    "{}; the worker pools paused for this update ({}) stay paused: a rerun goes on and resumes them once the control plane is at the target",
                    f.msg,
                    paused.join(", ")
                );
                f.with("paused_pools", json!(paused))
            }
        })?;
        let reached = out
            .data
            .get("version")
            .and_then(Value::as_str)
            .map(str::to_string);
        let done = at_target || m.check_mode || !r.o.wait || r.o.upgrade_path != "auto";
        match reached {
            Some(v)
                if !done
                    && !r.req.satisfied_by(
                        &semver::Version::parse(&v).map_err(|e| Failure::new(e.to_string()))?,
                    ) =>
            {
                if hops.contains(&v) || hops.len() >= MAX_HOPS {
                    return Err(Failure::new(format!(
                        "upgrade_path auto: no progress towards {} after the hops {}",
                        r.req,
                        hops.join(" -> ")
                    ))
                    .changed(true));
                }
                hops.push(v);
            }
            _ => {
                if !hops.is_empty() {
                    let from = first_from.unwrap_or_default();
                    let to = out
                        .data
                        .get("to")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    out.changed = true;
                    out = out.with("from", from.clone()).msg(format!(
                        "upgraded {from} -> {} -> {to} (upgrade_path auto)",
                        hops.join(" -> ")
                    ));
                }
                let arrived = at_target
                    || reached
                        .as_deref()
                        .and_then(|v| semver::Version::parse(v).ok())
                        .is_some_and(|v| r.req.satisfied_by(&v));
                let resumed = if m.check_mode {
                    paused.clone() // the plan: paused for the hops, resumed at the end
                } else if arrived {
                    resume_ours(m, &r)?
                } else {
                    Vec::new()
                };
                out.changed |= !paused.is_empty() || !resumed.is_empty();
                return Ok(out
                    .with("hops", json!(hops))
                    .with("paused_pools", json!(paused))
                    .with("resumed_pools", json!(resumed)));
            }
        }
    }
}

/// A Control Plane Only update: `upgrade_path: auto` over more than one minor with `pause_worker_pools`.
fn control_plane_only(r: &Run, plan: &Plan) -> bool {
    r.o.pause_worker_pools
        && r.o.upgrade_path == "auto"
        && r.o.wait
        && pools::control_plane_only(&plan.from, &r.req)
}

/// At the target: resume the pools this module paused (by any run, so a rerun after a failure resumes
/// them) once the control plane's pool has rolled the target, and wait for them to roll it onto the workers.
fn resume_ours(m: &mut Module, r: &Run) -> Result<Vec<String>, Failure> {
    let names = pools::ours(&r.pools()?);
    if !names.is_empty() {
        r.wait_pools().map_err(|f| f.changed(true))?;
    }
    pool_diffs(m, &names, false);
    r.set_paused(&names, false, false)?;
    if !names.is_empty() {
        r.wait_resumed(&names).map_err(|f| f.changed(true))?;
    }
    Ok(names)
}

/// The diff of pausing (or resuming) each of `names`.
fn pool_diffs(m: &mut Module, names: &[String], pause: bool) {
    for n in names {
        let header = format!("MachineConfigPool {n}");
        m.add_diff(
            json!({"spec": {"paused": !pause}}),
            json!({"spec": {"paused": pause}}),
            &header,
            &header,
        );
    }
}

/// Hops an update path may take at most (a minor takes two or three).
const MAX_HOPS: usize = 8;

/// `upgrade_path: auto` when the request is not offered: the plan of the next hop, under the same
/// rules (health, `Upgradeable`, channel) as a direct update to it.
fn hop_plan(r: &Run, cv: &Value, ops: &[Value]) -> Option<Plan> {
    let current = semver::Version::parse(&decide::current_version(cv)?).ok()?;
    let hop = r.hop(cv, &current)?;
    let req = Request::Exact(semver::Version::parse(&hop.version).ok()?);
    let mut wish = r.wish();
    wish.channel = cv
        .pointer("/spec/channel")
        .and_then(Value::as_str)
        .map(str::to_string);
    decide::decide(cv, ops, &req, &wish).ok()
}

fn channel_json(plan: &Plan) -> Value {
    plan.channel
        .as_ref()
        .map(|(a, b)| json!({"from": a, "to": b}))
        .unwrap_or(Value::Null)
}

fn carry_out(m: &mut Module, r: &Run, plan: Plan, before: Value) -> Result<Outcome, Failure> {
    let from = plan.from.clone();
    let channel_note = plan
        .channel
        .as_ref()
        .map(|(a, b)| format!(" (channel '{a}' -> '{b}')"))
        .unwrap_or_default();
    let out = |changed: bool, to: &str| {
        Outcome::new(changed)
            .with("from", from.clone())
            .with("to", to.to_string())
            .with("requested", r.req.to_string())
            .with("channel", channel_json(&plan))
    };
    let mut after = before.clone();
    if let Some((_, c)) = &plan.channel {
        after["channel"] = json!(c);
    }
    match &plan.action {
        Action::AtTarget => {
            let changed = plan.channel.is_some();
            if changed {
                m.add_diff(
                    before,
                    after,
                    "ClusterVersion version",
                    "ClusterVersion version",
                );
                if !m.check_mode {
                    let c = plan.channel.as_ref().map(|(_, c)| c.clone());
                    r.patch_spec(json!({"channel": c}), "setting spec.channel")?;
                }
            }
            Ok(out(changed, &from)
                .with("version", from.clone())
                .msg(format!(
                    "the cluster is at {from}, as requested ({}){channel_note}",
                    r.req
                )))
        }
        Action::Resume { to } => {
            if !r.o.wait || m.check_mode {
                return Ok(out(false, to).msg(format!("the update {from} -> {to} is under way")));
            }
            let mut seen = Vec::new();
            r.wait_done(to, &mut seen)?;
            r.final_check(to)?;
            Ok(out(false, to)
                .with("version", to.clone())
                .with("progress", json!(seen))
                .msg(format!(
                    "the update {from} -> {to} (under way already) completed"
                )))
        }
        Action::Update(_) | Action::AfterChannel => start(m, r, &plan, before, after, channel_note),
    }
}

/// Set the channel and the desired update (or say what would be set), then wait.
fn start(
    m: &mut Module,
    r: &Run,
    plan: &Plan,
    before: Value,
    mut after: Value,
    channel_note: String,
) -> Result<Outcome, Failure> {
    let from = &plan.from;
    let known_target = match &plan.action {
        Action::Update(t) => Some(t.clone()),
        _ => None,
    };
    if m.check_mode {
        let (to, how) = match &known_target {
            Some(t) => (t.version.clone(), t.version.clone()),
            None => (
                r.req.to_string(),
                format!("{} (as the new channel offers it)", r.req),
            ),
        };
        if let Some(t) = &known_target {
            after["desiredUpdate"] = t.desired_update();
        }
        m.add_diff(
            before,
            after,
            "ClusterVersion version",
            "ClusterVersion version",
        );
        return Ok(Outcome::new(true)
            .with("from", from.clone())
            .with("to", to)
            .with("requested", r.req.to_string())
            .with("channel", channel_json(plan))
            .msg(format!("would upgrade {from} -> {how}{channel_note}")));
    }
    if let Some((_, new)) = &plan.channel {
        r.patch_spec(json!({"channel": new}), "setting spec.channel")?;
    }
    let target = match (known_target, &plan.channel) {
        (Some(t), _) => t,
        (None, channel) => match r.target_after_channel(from) {
            Ok(t) => t,
            Err(f) => {
                // Leave the cluster as it was: the new channel does not lead where the task wants.
                let old = channel.as_ref().map(|(o, _)| o.clone()).unwrap_or_default();
                let back = if old.is_empty() {
                    Value::Null
                } else {
                    json!(old)
                };
                r.patch_spec(json!({"channel": back}), "setting spec.channel back")?;
                return Err(f.with("channel_restored", old));
            }
        },
    };
    if target.force {
        m.warn(format!(
            "forcing the unverified release image {} (allow_explicit_image): the cluster-version operator does not check its signature",
            target.image
        ));
    }
    r.patch_spec(
        json!({"desiredUpdate": target.desired_update()}),
        "setting spec.desiredUpdate",
    )?;
    after["desiredUpdate"] = target.desired_update();
    m.add_diff(
        before,
        after,
        "ClusterVersion version",
        "ClusterVersion version",
    );
    let to = target.version.clone();
    let base = Outcome::new(true)
        .with("from", from.clone())
        .with("to", to.clone())
        .with("requested", r.req.to_string())
        .with("channel", channel_json(plan))
        .with("image", target.image.clone());
    if !r.o.wait {
        return Ok(base.msg(format!("requested the update {from} -> {to}{channel_note}")));
    }
    let mut seen = Vec::new();
    r.wait_done(&to, &mut seen).map_err(|f| f.changed(true))?;
    r.final_check(&to).map_err(|f| f.changed(true))?;
    Ok(base
        .with("version", to.clone())
        .with("progress", json!(seen))
        .msg(format!("upgraded {from} -> {to}{channel_note}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(
            &super::argument_spec(),
            "openshift",
            "cluster_upgrade",
        );
    }
}
