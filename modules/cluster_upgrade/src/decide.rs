//! Pure upgrade rules: what the cluster runs, what it may be upgraded to, and whether now is the time.
//! No I/O: the ClusterVersion and ClusterOperators come in as JSON, a [`Plan`] or a [`Refusal`] goes out.
//!
//! The rules follow the cluster-version operator (CVO) and `oc adm upgrade`:
//! - the current version is the newest `Completed` entry of `status.history` (newest first), else the
//!   oldest entry (the installed version), else `status.desired.version` — openshift/cluster-version-operator
//!   `pkg/payload/precondition/clusterversion/upgradeable.go`, `GetCurrentVersion`;
//! - the target must be one of `status.availableUpdates` (openshift/oc `pkg/cli/admin/upgrade/upgrade.go`,
//!   `Run`: "the update is not one of the possible targets"); an unlisted image only when asked
//!   (`--allow-explicit-upgrade`), and then forced, since the CVO cannot verify it;
//! - no update while one is under way or the ClusterVersion reports `Failing`/`Invalid` (oc
//!   `checkForUpgrade`), nor while a ClusterOperator is `Degraded=True` or `Available=False`;
//! - `Upgradeable=False` blocks a minor-version update, not a z-stream one (CVO `upgradeable.go`,
//!   `Upgradeable.Run`: "a patch level update with the same minor level is allowed");
//! - a target listed only in `status.conditionalUpdates` is not recommended for this cluster: refused
//!   naming its risks, unless every risk is accepted by name (`accept_risks`; openshift/oc
//!   `pkg/cli/admin/upgrade/upgrade.go`: "--allow-not-recommended", the risks of `ConditionalUpdate`);
//! - while an update runs, `ReleaseAccepted=False` (the CVO could not retrieve or verify the payload,
//!   cluster-version-operator `pkg/cvo/sync_worker.go` / `pkg/cvo/status.go`) still there a poll later
//!   ends the wait at once, with the operator's message; `Failing=True` does only once it is not
//!   transient — the CVO stopped progressing, or it lasted [`FAILING_GRACE`], or an operator is past
//!   `oc adm upgrade status`'s thresholds ([`stuck`]); a younger one is reported, and the CVO retries;
//! - between the hops of `upgrade_path: auto`, the machine config pools roll the new release onto the
//!   nodes and the CVO says `Upgradeable=False` (`PoolUpdating`) meanwhile: the next hop waits for them
//!   ([`pools_rolling`]);
//! - the fields are openshift/api `config/v1/types_cluster_version.go` (`ClusterVersionStatus`,
//!   `UpdateHistory`, `Update`, `Release`).

use std::fmt;

use kube_client::objects::conditions;
use semver::Version;
use serde_json::{json, Value};

/// What the task asks for: a minor (`4.19`: any of its z-streams will do, the newest offered when an
/// update is needed) or an exact release (`4.19.7`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Minor { major: u64, minor: u64 },
    Exact(Version),
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Minor { major, minor } => write!(f, "{major}.{minor}"),
            Request::Exact(v) => write!(f, "{v}"),
        }
    }
}

impl Request {
    fn major_minor(&self) -> (u64, u64) {
        match self {
            Request::Minor { major, minor } => (*major, *minor),
            Request::Exact(v) => (v.major, v.minor),
        }
    }

    /// Does a cluster at `v` have what was asked for?
    pub fn satisfied_by(&self, v: &Version) -> bool {
        match self {
            Request::Minor { major, minor } => v.major == *major && v.minor == *minor,
            Request::Exact(want) => v == want,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("version '{0}' is neither a minor (4.19) nor an exact release (4.19.7)")]
pub struct RequestError(pub String);

pub fn parse_request(text: &str) -> Result<Request, RequestError> {
    let t = text.trim();
    let bad = || RequestError(text.to_string());
    let parts: Vec<&str> = t.split('.').collect();
    if parts.len() == 2 {
        let n = |s: &str| s.parse::<u64>().ok().filter(|_| !s.starts_with('+'));
        return match (n(parts[0]), n(parts[1])) {
            (Some(major), Some(minor)) => Ok(Request::Minor { major, minor }),
            _ => Err(bad()),
        };
    }
    Version::parse(t).map(Request::Exact).map_err(|_| bad())
}

/// One entry of `status.availableUpdates`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    pub version: String,
    pub image: String,
}

/// What goes into `spec.desiredUpdate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub version: String,
    pub image: String,
    /// Only for an explicit image the cluster does not offer (`allow_explicit_image`).
    pub force: bool,
}

impl Target {
    pub fn desired_update(&self) -> Value {
        json!({"version": self.version, "image": self.image, "force": self.force})
    }
}

/// The task's wishes besides the version.
#[derive(Debug, Clone, Default)]
pub struct Wish {
    /// `spec.channel` to set; `None`: the current channel's prefix (`stable`, `fast`, …) with the
    /// target's minor, `stable-<minor>` when the cluster has none.
    pub channel: Option<String>,
    pub image: Option<String>,
    pub allow_explicit_image: bool,
    /// Names of conditional-update risks accepted (`accept_risks`).
    pub accept_risks: Vec<String>,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The cluster is at the requested version.
    AtTarget,
    /// An update to a version that satisfies the request is already under way: wait for it.
    Resume { to: String },
    /// Set `spec.desiredUpdate` to the target.
    Update(Target),
    /// The channel changes first; the target comes from the updates the new channel offers
    /// ([`resolve`] once the CVO has refreshed `status.availableUpdates`).
    AfterChannel,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub from: String,
    pub action: Action,
    /// `(old, new)` when `spec.channel` is to change.
    pub channel: Option<(String, String)>,
}

/// Why the cluster is not upgraded. Each names what the task asked and what the cluster says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "the ClusterVersion reports no version yet (no status.history, no status.desired.version)"
    )]
    NoCurrentVersion,
    #[error("the cluster's current version '{0}' is not a semantic version")]
    BadCurrentVersion(String),
    #[error("refusing to lower the version: the cluster runs {current}, {requested} was requested (downgrades are not supported)")]
    Lowering { current: String, requested: String },
    #[error("an update to {to} is already under way (ClusterVersion Progressing=True: {message}); wait for it to finish before requesting {requested}")]
    InProgress {
        to: String,
        requested: String,
        message: String,
    },
    #[error("the cluster is not healthy, not upgrading to {requested}: {problems}")]
    Unhealthy { requested: String, problems: String },
    #[error("ClusterVersion Upgradeable=False ({reason}: {message}): a minor-version update from {current} to {requested} is blocked (z-stream updates are allowed)")]
    NotUpgradeable {
        current: String,
        requested: String,
        reason: String,
        message: String,
    },
    #[error("the update to {requested} is not offered by channel '{channel}' (status.availableUpdates: {}){retrieved}", offered_list(.offered))]
    NotOffered {
        requested: String,
        channel: String,
        offered: Vec<String>,
        /// The CVO's word on retrieving updates when it failed (`RetrievedUpdates=False`).
        retrieved: String,
    },
    #[error("{version} is not recommended for this cluster (status.conditionalUpdates): {risks}; accept every risk by name in accept_risks to update anyway (not accepted: {})", .unaccepted.join(", "))]
    NotRecommended {
        version: String,
        /// Each risk as `Name: message (url)`.
        risks: String,
        unaccepted: Vec<String>,
    },
    #[error("image {image} is not the image the cluster offers for {version} ({offered}); set allow_explicit_image to force an unverified image")]
    ImageNotOffered {
        image: String,
        version: String,
        offered: String,
    },
}

fn offered_list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn text<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn condition(obj: &Value, t: &str) -> Option<kube_client::Condition> {
    conditions(obj).into_iter().find(|c| c.type_ == t)
}

fn is(obj: &Value, t: &str, status: &str) -> bool {
    condition(obj, t).is_some_and(|c| c.status == status)
}

fn why(c: &kube_client::Condition) -> String {
    let r = c.reason.clone().unwrap_or_default();
    match c.message.as_deref().filter(|m| !m.is_empty()) {
        Some(m) if !r.is_empty() => format!("{r}: {m}"),
        Some(m) => m.to_string(),
        None => r,
    }
}

/// The version the cluster runs (`GetCurrentVersion`, then `status.desired.version`).
pub fn current_version(cv: &Value) -> Option<String> {
    let history = cv
        .pointer("/status/history")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    history
        .iter()
        .find(|h| text(h, "/state") == Some("Completed"))
        .or(history.last())
        .and_then(|h| text(h, "/version"))
        .or_else(|| text(cv, "/status/desired/version"))
        .map(str::to_string)
}

/// The version an update under way goes to: `Progressing=True` while the newest history entry is not
/// `Completed` at `status.desired.version`.
pub fn in_progress(cv: &Value) -> Option<String> {
    if !is(cv, "Progressing", "True") {
        return None;
    }
    let desired = text(cv, "/status/desired/version");
    let done = text(cv, "/status/history/0/state") == Some("Completed")
        && text(cv, "/status/history/0/version") == desired;
    if done {
        return None;
    }
    Some(
        desired
            .or_else(|| text(cv, "/status/desired/image"))
            .unwrap_or("an unknown version")
            .to_string(),
    )
}

pub fn available(cv: &Value) -> Vec<Release> {
    cv.pointer("/status/availableUpdates")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| {
                    Some(Release {
                        version: text(r, "/version")?.to_string(),
                        image: text(r, "/image").unwrap_or_default().to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One entry of `status.conditionalUpdates`: the release and its risks as `(name, "message (url)")`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conditional {
    pub release: Release,
    pub risks: Vec<(String, String)>,
}

pub fn conditional(cv: &Value) -> Vec<Conditional> {
    cv.pointer("/status/conditionalUpdates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|u| {
            let release = Release {
                version: text(u, "/release/version")?.to_string(),
                image: text(u, "/release/image").unwrap_or_default().to_string(),
            };
            let risks = u
                .pointer("/risks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|r| {
                    let name = text(r, "/name").unwrap_or("unnamed").to_string();
                    let what = format!(
                        "{} ({})",
                        text(r, "/message").unwrap_or(""),
                        text(r, "/url").unwrap_or("no url")
                    );
                    (name, what)
                })
                .collect();
            Some(Conditional { release, risks })
        })
        .collect()
}

/// The release `req` names among `list` (an exact version, or the newest of a minor above `current`).
fn pick<'a>(list: &'a [Release], req: &Request, current: &Version) -> Option<&'a Release> {
    match req {
        Request::Exact(v) => list
            .iter()
            .find(|r| Version::parse(&r.version).is_ok_and(|x| &x == v)),
        Request::Minor { major, minor } => list
            .iter()
            .filter_map(|r| Version::parse(&r.version).ok().map(|v| (v, r)))
            .filter(|(v, _)| v.major == *major && v.minor == *minor && v > current)
            .max_by(|a, b| a.0.cmp(&b.0))
            .map(|(_, r)| r),
    }
}

/// A conditional update the task asked for: allowed when every risk is accepted by name.
fn conditional_target(
    cv: &Value,
    req: &Request,
    current: &Version,
    wish: &Wish,
) -> Option<Result<Release, Refusal>> {
    let all = conditional(cv);
    let releases: Vec<Release> = all.iter().map(|c| c.release.clone()).collect();
    let r = pick(&releases, req, current)?;
    let c = all.iter().find(|c| c.release == *r)?;
    let unaccepted: Vec<String> = c
        .risks
        .iter()
        .map(|(n, _)| n.clone())
        .filter(|n| !wish.accept_risks.contains(n))
        .collect();
    Some(if unaccepted.is_empty() {
        Ok(r.clone())
    } else {
        Err(Refusal::NotRecommended {
            version: r.version.clone(),
            risks: c
                .risks
                .iter()
                .map(|(n, w)| format!("{n}: {w}"))
                .collect::<Vec<_>>()
                .join("; "),
            unaccepted,
        })
    })
}

/// With `upgrade_path: auto`, the next hop towards `req` when the cluster does not offer it: the newest
/// offered release above `current` that does not pass the request (a later z-stream of the current
/// minor first, from which the channel's graph leads on — the update service's edges).
pub fn next_hop(cv: &Value, req: &Request, current: &Version) -> Option<Release> {
    let within = |v: &Version| match req {
        Request::Exact(t) => v < t,
        Request::Minor { major, minor } => (v.major, v.minor) < (*major, *minor),
    };
    available(cv)
        .into_iter()
        .filter_map(|r| Version::parse(&r.version).ok().map(|v| (v, r)))
        .filter(|(v, _)| v > current && within(v))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, r)| r)
}

/// How long the ClusterVersion may say `Failing=True` while the cluster-version operator still applies
/// the update (`Progressing=True`) before the update counts as stuck: `oc adm upgrade status`'s error
/// threshold for an unavailable ClusterOperator (openshift/oc `pkg/cli/admin/upgrade/status/controlplane.go`,
/// `unavailableErrorThreshold`). The CVO retries a failed sync by itself (`pkg/cvo/sync_worker.go`), so a
/// `Failing=True` from an operator briefly `Available=False` mid-update clears on its own.
pub const FAILING_GRACE: i64 = 20 * 60;
/// `oc adm upgrade status`'s error thresholds for a ClusterOperator (`coInsights`): `Available=False` for
/// 20 minutes, `Degraded=True` for 40 minutes.
pub const UNAVAILABLE_ERROR: i64 = 20 * 60;
pub const DEGRADED_ERROR: i64 = 40 * 60;

/// Why an update under way cannot go on, from one look at the ClusterVersion and the ClusterOperators at
/// `now` (Unix seconds): the operator did not accept the release (`ReleaseAccepted=False`), or it reports
/// `Failing=True` and either no longer progresses (`Progressing` not `True`), or has been failing for
/// [`FAILING_GRACE`], or a ClusterOperator has been `Available=False`/`Degraded=True` past `oc adm upgrade
/// status`'s error thresholds. A younger `Failing=True` while the CVO progresses is transient: reported in
/// the progress ([`progress`]), not the end of the wait. The operator's words.
pub fn stuck(cv: &Value, ops: &[Value], now: i64) -> Option<String> {
    if let Some(c) = condition(cv, "ReleaseAccepted").filter(|c| c.status == "False") {
        return Some(format!(
            "the cluster-version operator did not accept the release (ReleaseAccepted=False, {})",
            why(&c)
        ));
    }
    let failing = condition(cv, "Failing").filter(|c| c.status == "True")?;
    let lasted = |obj: &Value, t: &str| {
        kube_client::objects::condition_since(obj, t).map_or(0, |since| now - since)
    };
    let settled = !is(cv, "Progressing", "True")
        || lasted(cv, "Failing") >= FAILING_GRACE
        || !operators_past_thresholds(ops, now).is_empty();
    settled.then(|| {
        format!(
            "the update is failing (ClusterVersion Failing=True, {})",
            why(&failing)
        )
    })
}

/// ClusterOperators `Available=False` or `Degraded=True` for longer than `oc adm upgrade status`'s error
/// thresholds ([`UNAVAILABLE_ERROR`], [`DEGRADED_ERROR`]) at `now`.
pub fn operators_past_thresholds(ops: &[Value], now: i64) -> Vec<String> {
    let mut out = Vec::new();
    for o in ops {
        for (t, bad, limit) in [
            ("Available", "False", UNAVAILABLE_ERROR),
            ("Degraded", "True", DEGRADED_ERROR),
        ] {
            let since = kube_client::objects::condition_since(o, t);
            if is(o, t, bad) && since.is_some_and(|s| now - s >= limit) {
                let name = text(o, "/metadata/name").unwrap_or("?");
                out.push(format!("ClusterOperator {name} {t}={bad}"));
            }
        }
    }
    out
}

/// The machine config pools still rolling after an update: the `machine-config` ClusterOperator says
/// `Upgradeable=False` with reason `PoolUpdating` (openshift/machine-config-operator `pkg/operator/status.go`,
/// `syncUpgradeableStatus`), which the CVO turns into `Upgradeable=False` on the ClusterVersion (same reason,
/// some time later: its upgradeable checks are throttled, `pkg/cvo/upgradeable.go`) and so refuses a
/// minor-version update until the pools are done. `upgrade_path: auto` waits for both between hops.
pub fn pools_rolling(cv: &Value, ops: &[Value]) -> Option<String> {
    let updating = |obj: &Value| {
        condition(obj, "Upgradeable")
            .filter(|c| c.status == "False" && c.reason.as_deref() == Some("PoolUpdating"))
    };
    if let Some(c) = ops
        .iter()
        .find(|o| text(o, "/metadata/name") == Some("machine-config"))
        .and_then(updating)
    {
        return Some(format!(
            "ClusterOperator machine-config Upgradeable=False ({})",
            why(&c)
        ));
    }
    updating(cv).map(|c| format!("ClusterVersion Upgradeable=False ({})", why(&c)))
}

/// Offered versions, newest first (as oc sorts them).
fn offered_versions(list: &[Release]) -> Vec<String> {
    let mut v: Vec<&Release> = list.iter().collect();
    v.sort_by(
        |a, b| match (Version::parse(&a.version), Version::parse(&b.version)) {
            (Ok(x), Ok(y)) => y.cmp(&x),
            (Ok(_), Err(_)) => std::cmp::Ordering::Less,
            (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
            _ => b.version.cmp(&a.version),
        },
    );
    v.into_iter().map(|r| r.version.clone()).collect()
}

/// ClusterOperators that are `Degraded=True` or `Available=False`, each with why.
pub fn unhealthy_operators(ops: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for o in ops {
        let name = text(o, "/metadata/name").unwrap_or("?");
        for (t, bad) in [("Degraded", "True"), ("Available", "False")] {
            if let Some(c) = condition(o, t).filter(|c| c.status == bad) {
                out.push(format!("ClusterOperator {name} {t}={bad} ({})", why(&c)));
            }
        }
    }
    out
}

/// The channel to set: the wish, else the current channel's prefix with the target's minor.
pub fn wanted_channel(wish: Option<&str>, current: &str, major: u64, minor: u64) -> String {
    if let Some(w) = wish {
        return w.to_string();
    }
    let prefix = current
        .rsplit_once('-')
        .filter(|(_, mm)| parse_request(mm).is_ok_and(|r| matches!(r, Request::Minor { .. })))
        .map(|(p, _)| p)
        .filter(|p| !p.is_empty())
        .unwrap_or("stable");
    format!("{prefix}-{major}.{minor}")
}

/// `a` and `b` name the same image: equal, or the same `@sha256:` digest (oc `targetMatch`).
fn same_image(a: &str, b: &str) -> bool {
    let digest = |s: &str| s.rsplit_once('@').map(|(_, d)| d.to_string());
    a == b || (digest(a).is_some() && digest(a) == digest(b))
}

/// The target among the offered updates (or the explicit image, when allowed).
pub fn resolve(
    cv: &Value,
    req: &Request,
    current: &Version,
    wish: &Wish,
) -> Result<Target, Refusal> {
    let list = available(cv);
    let mut found = pick(&list, req, current).cloned();
    if found.is_none() && wish.image.is_none() {
        found = conditional_target(cv, req, current, wish).transpose()?;
    }
    match (found, wish.image.as_deref()) {
        (Some(r), None) => Ok(Target {
            version: r.version,
            image: r.image,
            force: false,
        }),
        (Some(r), Some(img)) if same_image(img, &r.image) => Ok(Target {
            version: r.version,
            image: img.to_string(),
            force: false,
        }),
        (Some(r), Some(img)) if !wish.allow_explicit_image => Err(Refusal::ImageNotOffered {
            image: img.to_string(),
            version: r.version,
            offered: r.image,
        }),
        (_, Some(img)) if wish.allow_explicit_image => Ok(Target {
            version: req.to_string(),
            image: img.to_string(),
            force: true,
        }),
        _ => {
            let retrieved = condition(cv, "RetrievedUpdates")
                .filter(|c| c.status == "False")
                .map(|c| format!("; the cluster cannot retrieve updates: {}", why(&c)))
                .unwrap_or_default();
            Err(Refusal::NotOffered {
                requested: req.to_string(),
                channel: text(cv, "/spec/channel").unwrap_or("").to_string(),
                offered: offered_versions(&list),
                retrieved,
            })
        }
    }
}

/// The decision for one look at the cluster (before anything is written).
pub fn decide(cv: &Value, ops: &[Value], req: &Request, wish: &Wish) -> Result<Plan, Refusal> {
    let from = current_version(cv).ok_or(Refusal::NoCurrentVersion)?;
    let current = Version::parse(&from).map_err(|_| Refusal::BadCurrentVersion(from.clone()))?;
    let spec_channel = text(cv, "/spec/channel").unwrap_or("").to_string();
    if let Some(to) = in_progress(cv) {
        if Version::parse(&to).is_ok_and(|v| req.satisfied_by(&v)) {
            return Ok(Plan {
                from,
                action: Action::Resume { to },
                channel: None,
            });
        }
        let message = condition(cv, "Progressing")
            .map(|c| why(&c))
            .unwrap_or_default();
        return Err(Refusal::InProgress {
            to,
            requested: req.to_string(),
            message,
        });
    }
    if req.satisfied_by(&current) {
        // At the target, only a channel the task names explicitly is set.
        let channel = wish
            .channel
            .clone()
            .filter(|c| *c != spec_channel)
            .map(|c| (spec_channel.clone(), c));
        return Ok(Plan {
            from,
            action: Action::AtTarget,
            channel,
        });
    }
    let (major, minor) = req.major_minor();
    let lower = match req {
        Request::Exact(v) => *v < current,
        Request::Minor { .. } => (major, minor) < (current.major, current.minor),
    };
    if lower {
        return Err(Refusal::Lowering {
            current: from,
            requested: req.to_string(),
        });
    }
    let mut problems: Vec<String> = ["Failing", "Invalid"]
        .iter()
        .filter_map(|t| condition(cv, t).filter(|c| c.status == "True"))
        .map(|c| format!("ClusterVersion {}=True ({})", c.type_, why(&c)))
        .collect();
    problems.extend(unhealthy_operators(ops));
    if !problems.is_empty() {
        return Err(Refusal::Unhealthy {
            requested: req.to_string(),
            problems: problems.join("; "),
        });
    }
    let minor_update = (major, minor) != (current.major, current.minor);
    if let Some(c) = condition(cv, "Upgradeable").filter(|c| c.status == "False" && minor_update) {
        return Err(Refusal::NotUpgradeable {
            current: from,
            requested: req.to_string(),
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
        });
    }
    let want = wanted_channel(wish.channel.as_deref(), &spec_channel, major, minor);
    if want != spec_channel {
        // An explicit image needs no offer, so it does not wait for the new channel's updates.
        let action = match (&wish.image, wish.allow_explicit_image) {
            (Some(_), true) => Action::Update(resolve(cv, req, &current, wish)?),
            _ => Action::AfterChannel,
        };
        return Ok(Plan {
            from,
            action,
            channel: Some((spec_channel, want)),
        });
    }
    let target = resolve(cv, req, &current, wish)?;
    // Requested already (a rerun before the operator has picked it up): wait for it, do not ask again.
    let asked = text(cv, "/spec/desiredUpdate/version") == Some(target.version.as_str())
        && text(cv, "/spec/desiredUpdate/image").is_none_or(|i| i == target.image);
    let action = if asked {
        Action::Resume { to: target.version }
    } else {
        Action::Update(target)
    };
    Ok(Plan {
        from,
        action,
        channel: None,
    })
}

/// How far an update to `target` has got, from one look at the ClusterVersion and the operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub done: bool,
    /// The newest history entry: `4.19.9 Partial`.
    pub history: String,
    /// ClusterOperators whose `status.versions` `operator` entry is the target, and how many there are.
    pub operators_updated: usize,
    pub operators_total: usize,
    /// `Failing=True` while updating (the CVO retries; reported, not fatal).
    pub failing: Option<String>,
    pub message: Option<String>,
}

impl Progress {
    pub fn to_json(&self) -> Value {
        json!({"done": self.done, "history": self.history, "operators_updated": self.operators_updated,
               "operators_total": self.operators_total, "failing": self.failing, "message": self.message})
    }

    /// What is still pending, for a wait's message.
    pub fn pending(&self, target: &str) -> String {
        let mut s = format!(
            "update to {target}: history {}, {} of {} operators at {target}",
            self.history, self.operators_updated, self.operators_total
        );
        if let Some(m) = &self.message {
            s.push_str(&format!(" ({m})"));
        }
        if let Some(f) = &self.failing {
            s.push_str(&format!("; Failing: {f}"));
        }
        s
    }
}

/// The operator's own version (`status.versions` entry `operator`).
fn operator_version(op: &Value) -> Option<&str> {
    op.pointer("/status/versions")
        .and_then(Value::as_array)?
        .iter()
        .find(|v| text(v, "/name") == Some("operator"))
        .and_then(|v| text(v, "/version"))
}

pub fn progress(cv: &Value, ops: &[Value], target: &str) -> Progress {
    let hv = text(cv, "/status/history/0/version").unwrap_or("none");
    let hs = text(cv, "/status/history/0/state").unwrap_or("-");
    Progress {
        done: completed_at(cv, target).is_ok(),
        history: format!("{hv} {hs}"),
        operators_updated: ops
            .iter()
            .filter(|o| operator_version(o) == Some(target))
            .count(),
        operators_total: ops.len(),
        failing: condition(cv, "Failing")
            .filter(|c| c.status == "True")
            .map(|c| why(&c)),
        message: condition(cv, "Progressing")
            .and_then(|c| c.message)
            .filter(|m| !m.is_empty()),
    }
}

/// The final check: `status.desired.version` is the target and the newest history entry is the
/// target, `Completed`.
pub fn completed_at(cv: &Value, target: &str) -> Result<(), String> {
    let desired = text(cv, "/status/desired/version");
    if desired != Some(target) {
        return Err(format!(
            "ClusterVersion status.desired.version is {}, not {target}",
            desired.unwrap_or("not set")
        ));
    }
    let hv = text(cv, "/status/history/0/version");
    let hs = text(cv, "/status/history/0/state");
    if hv != Some(target) || hs != Some("Completed") {
        return Err(format!(
            "the newest ClusterVersion history entry is {} {}, not {target} Completed",
            hv.unwrap_or("none"),
            hs.unwrap_or("-")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(t: &str, s: &str) -> Value {
        json!({"type": t, "status": s, "reason": "R", "message": format!("{t} is {s}")})
    }

    fn hist(entries: &[(&str, &str)]) -> Value {
        Value::Array(
            entries
                .iter()
                .map(|(v, s)| json!({"version": v, "state": s, "image": format!("img:{v}")}))
                .collect(),
        )
    }

    /// A settled cluster at `at`, on `channel`, offering `offered`.
    fn cv(at: &str, channel: &str, offered: &[&str]) -> Value {
        json!({"spec": {"clusterID": "x", "channel": channel},
               "status": {"desired": {"version": at, "image": format!("img:{at}")},
                          "history": hist(&[(at, "Completed")]),
                          "availableUpdates": offered.iter().map(|v| json!({"version": v, "image": format!("q@sha256:{v}")})).collect::<Vec<_>>(),
                          "conditions": [cond("Available", "True"), cond("Progressing", "False"), cond("Failing", "False")]}})
    }

    fn op(name: &str, version: &str, degraded: &str, available: &str) -> Value {
        json!({"metadata": {"name": name}, "status": {
            "conditions": [cond("Available", available), cond("Degraded", degraded)],
            "versions": [{"name": "operator", "version": version}, {"name": "operand", "version": "1.0"}]}})
    }

    fn healthy(at: &str) -> Vec<Value> {
        vec![
            op("etcd", at, "False", "True"),
            op("dns", at, "False", "True"),
        ]
    }

    fn req(s: &str) -> Request {
        parse_request(s).unwrap()
    }

    fn set_cond(cv: &mut Value, c: Value) {
        let list = cv["status"]["conditions"].as_array_mut().unwrap();
        list.retain(|x| x["type"] != c["type"]);
        list.push(c);
    }

    #[test]
    fn requests_are_minors_or_exact_releases() {
        assert_eq!(
            req("4.19"),
            Request::Minor {
                major: 4,
                minor: 19
            }
        );
        assert_eq!(req(" 4.19.7 "), Request::Exact(Version::new(4, 19, 7)));
        assert_eq!(req("4.20.0-ec.2").to_string(), "4.20.0-ec.2");
        for bad in ["4", "4.x", "latest", "", "4.19.7.1", "v4.19"] {
            assert!(parse_request(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_request("4.x").unwrap_err().to_string(),
            "version '4.x' is neither a minor (4.19) nor an exact release (4.19.7)"
        );
    }

    #[test]
    fn current_version_is_the_newest_completed_entry() {
        let mut c = cv("4.18.3", "stable-4.18", &[]);
        c["status"]["history"] = hist(&[
            ("4.19.1", "Partial"),
            ("4.18.3", "Completed"),
            ("4.18.1", "Completed"),
        ]);
        c["status"]["desired"]["version"] = json!("4.19.1");
        assert_eq!(current_version(&c).as_deref(), Some("4.18.3"));
        // No Completed entry: the oldest (the installed version), as GetCurrentVersion.
        c["status"]["history"] = hist(&[("4.18.2", "Partial"), ("4.18.1", "Partial")]);
        assert_eq!(current_version(&c).as_deref(), Some("4.18.1"));
        // No history: status.desired.version.
        c["status"]["history"] = json!([]);
        assert_eq!(current_version(&c).as_deref(), Some("4.19.1"));
        assert_eq!(current_version(&json!({})), None);
        assert_eq!(
            decide(&json!({}), &[], &req("4.19"), &Wish::default()),
            Err(Refusal::NoCurrentVersion)
        );
    }

    #[test]
    fn an_offered_exact_version_is_the_target() {
        let c = cv("4.19.7", "stable-4.19", &["4.19.8", "4.19.9"]);
        let p = decide(&c, &healthy("4.19.7"), &req("4.19.9"), &Wish::default()).unwrap();
        assert_eq!(p.from, "4.19.7");
        assert_eq!(p.channel, None);
        assert_eq!(
            p.action,
            Action::Update(Target {
                version: "4.19.9".into(),
                image: "q@sha256:4.19.9".into(),
                force: false
            })
        );
    }

    #[test]
    fn a_minor_takes_the_newest_offered_z_stream_of_that_minor() {
        let c = cv(
            "4.18.5",
            "stable-4.19",
            &["4.18.9", "4.19.2", "4.19.10", "4.19.3", "4.20.0"],
        );
        let p = decide(&c, &healthy("4.18.5"), &req("4.19"), &Wish::default()).unwrap();
        assert!(
            matches!(&p.action, Action::Update(t) if t.version == "4.19.10"),
            "{p:?}"
        );
    }

    #[test]
    fn a_conditional_target_is_refused_with_its_risks_until_they_are_accepted() {
        let mut c = cv("4.19.7", "stable-4.19", &["4.19.8"]);
        c["status"]["conditionalUpdates"] = json!([{
            "release": {"version": "4.19.9", "image": "q@sha256:4.19.9"},
            "risks": [{"name": "OVNDrop", "message": "pods lose traffic", "url": "https://issues.example/1",
                       "matchingRules": [{"type": "Always"}]},
                      {"name": "OldKernel", "message": "boot hangs", "url": "https://issues.example/2",
                       "matchingRules": [{"type": "Always"}]}],
            "conditions": [{"type": "Recommended", "status": "False", "reason": "MultipleReasons"}]}]);
        let ops = healthy("4.19.7");
        let e = decide(&c, &ops, &req("4.19.9"), &Wish::default()).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("4.19.9 is not recommended"), "{text}");
        assert!(
            text.contains("OVNDrop: pods lose traffic (https://issues.example/1)"),
            "{text}"
        );
        assert!(text.contains("not accepted: OVNDrop, OldKernel"), "{text}");
        let some = Wish {
            accept_risks: vec!["OVNDrop".into()],
            ..Wish::default()
        };
        let e = decide(&c, &ops, &req("4.19.9"), &some).unwrap_err();
        assert!(e.to_string().contains("not accepted: OldKernel"), "{e}");
        let all = Wish {
            accept_risks: vec!["OVNDrop".into(), "OldKernel".into()],
            ..Wish::default()
        };
        let p = decide(&c, &ops, &req("4.19.9"), &all).unwrap();
        assert_eq!(
            p.action,
            Action::Update(Target {
                version: "4.19.9".into(),
                image: "q@sha256:4.19.9".into(),
                force: false
            })
        );
        // A recommended target never needs an accepted risk; a minor prefers the recommended ones.
        assert!(decide(&c, &ops, &req("4.19.8"), &Wish::default()).is_ok());
        let p = decide(&c, &ops, &req("4.19"), &Wish::default()).unwrap();
        assert!(matches!(p.action, Action::AtTarget));
    }

    #[test]
    fn the_next_hop_is_the_newest_offered_release_short_of_the_request() {
        let c = cv("4.18.5", "stable-4.19", &["4.18.7", "4.18.9", "4.17.9"]);
        let at = Version::parse("4.18.5").unwrap();
        assert_eq!(next_hop(&c, &req("4.19"), &at).unwrap().version, "4.18.9");
        assert_eq!(next_hop(&c, &req("4.19.3"), &at).unwrap().version, "4.18.9");
        assert_eq!(next_hop(&c, &req("4.18.8"), &at).unwrap().version, "4.18.7");
        assert_eq!(
            next_hop(&c, &req("4.18.6"), &at),
            None,
            "no offer short of it: no path"
        );
        let none = cv("4.18.5", "stable-4.19", &[]);
        assert_eq!(next_hop(&none, &req("4.19"), &at), None);
    }

    /// A condition that turned to `status` at `at` (Unix seconds).
    fn cond_at(t: &str, s: &str, at: i64) -> Value {
        let mut c = cond(t, s);
        c["lastTransitionTime"] = json!(kube_client::oauth::rfc3339(at as u64));
        c
    }

    const NOW: i64 = 1_800_000_000;

    #[test]
    fn a_rejected_release_or_lasting_failure_is_stuck() {
        let mut c = cv("4.19.7", "stable-4.19", &[]);
        let ops = healthy("4.19.7");
        assert_eq!(stuck(&c, &ops, NOW), None);
        set_cond(
            &mut c,
            json!({"type": "ReleaseAccepted", "status": "False", "reason": "RetrievePayload",
                   "message": "Retrieving payload failed version=\"4.19.9\": signature verification failed"}),
        );
        let s = stuck(&c, &ops, NOW).unwrap();
        assert!(
            s.contains("ReleaseAccepted=False, RetrievePayload: Retrieving payload failed"),
            "{s}"
        );
        set_cond(&mut c, cond("ReleaseAccepted", "True"));
        // Failing while the CVO no longer progresses: stuck at once.
        set_cond(&mut c, cond_at("Failing", "True", NOW - 5));
        assert!(stuck(&c, &ops, NOW)
            .unwrap()
            .contains("Failing=True, R: Failing is True"));
        // Failing for FAILING_GRACE while progressing: stuck.
        set_cond(&mut c, cond("Progressing", "True"));
        set_cond(&mut c, cond_at("Failing", "True", NOW - FAILING_GRACE));
        assert!(stuck(&c, &ops, NOW).is_some());
    }

    #[test]
    fn a_transient_failure_while_progressing_is_not_stuck() {
        let mut c = cv("4.19.7", "stable-4.19", &[]);
        set_cond(&mut c, cond("Progressing", "True"));
        // An operator briefly Available=False mid-update: the CVO says Failing=True, and retries.
        set_cond(&mut c, cond_at("Failing", "True", NOW - 60));
        let mut ops = healthy("4.19.7");
        set_cond(&mut ops[0], cond_at("Available", "False", NOW - 90));
        assert_eq!(stuck(&c, &ops, NOW), None);
        // The same operator unavailable past oc adm upgrade status's error threshold: stuck.
        set_cond(
            &mut ops[0],
            cond_at("Available", "False", NOW - UNAVAILABLE_ERROR),
        );
        assert!(stuck(&c, &ops, NOW).is_some());
        // Degraded=True: stuck after 40 minutes, not before.
        let mut ops = healthy("4.19.7");
        set_cond(
            &mut ops[1],
            cond_at("Degraded", "True", NOW - DEGRADED_ERROR + 1),
        );
        assert_eq!(stuck(&c, &ops, NOW), None);
        set_cond(
            &mut ops[1],
            cond_at("Degraded", "True", NOW - DEGRADED_ERROR),
        );
        assert_eq!(
            operators_past_thresholds(&ops, NOW).len(),
            1,
            "{:?}",
            operators_past_thresholds(&ops, NOW)
        );
        assert!(stuck(&c, &ops, NOW).is_some());
    }

    #[test]
    fn rolling_pools_are_seen_on_the_machine_config_operator() {
        let mut ops = healthy("4.19.7");
        let mut c = cv("4.19.7", "stable-4.19", &[]);
        assert_eq!(pools_rolling(&c, &ops), None);
        let mut mco = op("machine-config", "4.19.7", "False", "True");
        set_cond(
            &mut mco,
            json!({"type": "Upgradeable", "status": "False", "reason": "PoolUpdating",
                   "message": "One or more machine config pools are updating, please see `oc get mcp` for further details"}),
        );
        ops.push(mco.clone());
        assert!(pools_rolling(&c, &ops).unwrap().contains(
            "Upgradeable=False (PoolUpdating: One or more machine config pools are updating"
        ));
        // Another reason (an admin gate, a degraded pool) is not pools rolling: the refusal stands.
        set_cond(
            ops.last_mut().unwrap(),
            json!({"type": "Upgradeable", "status": "False", "reason": "DegradedPool", "message": "x"}),
        );
        assert_eq!(pools_rolling(&c, &ops), None);
        // The CVO's view lags the operator's: its Upgradeable=False PoolUpdating still counts.
        set_cond(
            &mut c,
            json!({"type": "Upgradeable", "status": "False", "reason": "PoolUpdating", "message": "y"}),
        );
        assert!(pools_rolling(&c, &ops)
            .unwrap()
            .starts_with("ClusterVersion"));
    }

    #[test]
    fn at_the_target_nothing_is_done() {
        let c = cv("4.19.7", "stable-4.19", &["4.19.9"]);
        let ops = healthy("4.19.7");
        for r in ["4.19.7", "4.19"] {
            let p = decide(&c, &ops, &req(r), &Wish::default()).unwrap();
            assert_eq!((p.action, p.channel), (Action::AtTarget, None), "{r}");
        }
        // At the target, only a channel named explicitly is set.
        let w = Wish {
            channel: Some("fast-4.19".into()),
            ..Wish::default()
        };
        let p = decide(&c, &ops, &req("4.19.7"), &w).unwrap();
        assert_eq!(p.channel, Some(("stable-4.19".into(), "fast-4.19".into())));
    }

    #[test]
    fn a_requested_update_the_operator_has_not_picked_up_yet_is_waited_for() {
        let mut c = cv("4.19.7", "stable-4.19", &["4.19.9"]);
        c["spec"]["desiredUpdate"] =
            json!({"version": "4.19.9", "image": "q@sha256:4.19.9", "force": false});
        let p = decide(&c, &healthy("4.19.7"), &req("4.19.9"), &Wish::default()).unwrap();
        assert_eq!(
            p.action,
            Action::Resume {
                to: "4.19.9".into()
            }
        );
        c["spec"]["desiredUpdate"]["image"] = json!("other@sha256:x");
        let p = decide(&c, &healthy("4.19.7"), &req("4.19.9"), &Wish::default()).unwrap();
        assert!(matches!(p.action, Action::Update(_)), "{p:?}");
    }

    #[test]
    fn lowering_is_refused() {
        let c = cv("4.19.7", "stable-4.19", &["4.19.9"]);
        for r in ["4.19.6", "4.18", "4.18.20", "3.11"] {
            let e = decide(&c, &healthy("4.19.7"), &req(r), &Wish::default()).unwrap_err();
            assert_eq!(
                e,
                Refusal::Lowering {
                    current: "4.19.7".into(),
                    requested: r.into()
                }
            );
        }
        assert_eq!(
            decide(&c, &[], &req("4.19.6"), &Wish::default()).unwrap_err().to_string(),
            "refusing to lower the version: the cluster runs 4.19.7, 4.19.6 was requested (downgrades are not supported)"
        );
    }

    #[test]
    fn a_path_not_offered_names_the_request_and_the_offers() {
        let c = cv("4.19.7", "stable-4.19", &["4.19.8", "4.19.10", "4.19.9"]);
        let e = decide(&c, &healthy("4.19.7"), &req("4.19.11"), &Wish::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the update to 4.19.11 is not offered by channel 'stable-4.19' (status.availableUpdates: 4.19.10, 4.19.9, 4.19.8)"
        );
        let mut none = cv("4.19.7", "stable-4.19", &[]);
        set_cond(
            &mut none,
            json!({"type": "RetrievedUpdates", "status": "False", "reason": "RemoteFailed", "message": "no route"}),
        );
        let e = decide(&none, &[], &req("4.19.8"), &Wish::default()).unwrap_err();
        assert!(e.to_string().ends_with("(status.availableUpdates: none); the cluster cannot retrieve updates: RemoteFailed: no route"), "{e}");
        // A minor whose z-streams are all older than the cluster's: nothing to go to in that minor.
        let c = cv("4.19.7", "stable-4.20", &["4.20.1"]);
        assert!(matches!(
            decide(&c, &[], &req("4.20.2"), &Wish::default()),
            Err(Refusal::NotOffered { .. })
        ));
    }

    #[test]
    fn an_update_under_way_is_refused_unless_it_is_the_one_asked_for() {
        let mut c = cv("4.19.7", "stable-4.19", &["4.19.9"]);
        c["status"]["desired"]["version"] = json!("4.19.8");
        c["status"]["history"] = hist(&[("4.19.8", "Partial"), ("4.19.7", "Completed")]);
        set_cond(
            &mut c,
            json!({"type": "Progressing", "status": "True", "reason": "", "message": "Working towards 4.19.8: 12 of 800 done"}),
        );
        let e = decide(&c, &healthy("4.19.7"), &req("4.19.9"), &Wish::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "an update to 4.19.8 is already under way (ClusterVersion Progressing=True: Working towards 4.19.8: 12 of 800 done); wait for it to finish before requesting 4.19.9"
        );
        // The update asked for (a rerun after a timeout) is waited for, not started again.
        let p = decide(&c, &healthy("4.19.7"), &req("4.19.8"), &Wish::default()).unwrap();
        assert_eq!(
            p.action,
            Action::Resume {
                to: "4.19.8".into()
            }
        );
        let p = decide(&c, &healthy("4.19.7"), &req("4.19"), &Wish::default()).unwrap();
        assert_eq!(
            p.action,
            Action::Resume {
                to: "4.19.8".into()
            }
        );
        // Progressing=True while settled at desired (a reconcile, not an update) blocks nothing.
        let mut settled = cv("4.19.7", "stable-4.19", &["4.19.9"]);
        set_cond(&mut settled, cond("Progressing", "True"));
        assert_eq!(in_progress(&settled), None);
        assert!(decide(
            &settled,
            &healthy("4.19.7"),
            &req("4.19.9"),
            &Wish::default()
        )
        .is_ok());
    }

    #[test]
    fn degraded_or_unavailable_operators_and_a_failing_cluster_block() {
        let c = cv("4.19.7", "stable-4.19", &["4.19.9"]);
        let ops = vec![
            op("etcd", "4.19.7", "True", "True"),
            op("dns", "4.19.7", "False", "False"),
            op("ingress", "4.19.7", "False", "True"),
        ];
        let e = decide(&c, &ops, &req("4.19.9"), &Wish::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the cluster is not healthy, not upgrading to 4.19.9: ClusterOperator etcd Degraded=True (R: Degraded is True); ClusterOperator dns Available=False (R: Available is False)"
        );
        let mut failing = c.clone();
        set_cond(&mut failing, cond("Failing", "True"));
        let e = decide(
            &failing,
            &healthy("4.19.7"),
            &req("4.19.9"),
            &Wish::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&e, Refusal::Unhealthy { problems, .. } if problems == "ClusterVersion Failing=True (R: Failing is True)"),
            "{e}"
        );
    }

    #[test]
    fn upgradeable_false_blocks_a_minor_update_not_a_z_stream() {
        let mut c = cv("4.18.5", "stable-4.19", &["4.18.9", "4.19.2"]);
        set_cond(
            &mut c,
            json!({"type": "Upgradeable", "status": "False", "reason": "AdminAckRequired", "message": "ack the API removals"}),
        );
        let e = decide(&c, &healthy("4.18.5"), &req("4.19"), &Wish::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ClusterVersion Upgradeable=False (AdminAckRequired: ack the API removals): a minor-version update from 4.18.5 to 4.19 is blocked (z-stream updates are allowed)"
        );
        let mut z = c.clone();
        z["spec"]["channel"] = json!("stable-4.18");
        let p = decide(&z, &healthy("4.18.5"), &req("4.18.9"), &Wish::default()).unwrap();
        assert!(
            matches!(&p.action, Action::Update(t) if t.version == "4.18.9"),
            "{p:?}"
        );
    }

    #[test]
    fn the_channel_follows_the_target_minor_keeping_its_prefix() {
        assert_eq!(wanted_channel(None, "fast-4.18", 4, 19), "fast-4.19");
        assert_eq!(wanted_channel(None, "stable-4.19", 4, 19), "stable-4.19");
        assert_eq!(wanted_channel(None, "", 4, 19), "stable-4.19");
        assert_eq!(wanted_channel(None, "my-own", 4, 19), "stable-4.19");
        assert_eq!(
            wanted_channel(Some("candidate-4.20"), "fast-4.18", 4, 19),
            "candidate-4.20"
        );
        let c = cv("4.18.5", "fast-4.18", &["4.18.9"]);
        let p = decide(&c, &healthy("4.18.5"), &req("4.19.2"), &Wish::default()).unwrap();
        assert_eq!(p.channel, Some(("fast-4.18".into(), "fast-4.19".into())));
        assert_eq!(p.action, Action::AfterChannel);
        // After the channel change, the new channel's offers resolve the target.
        let mut after = c.clone();
        after["spec"]["channel"] = json!("fast-4.19");
        after["status"]["availableUpdates"] = json!([{"version": "4.19.2", "image": "q@sha256:b"}, {"version": "4.19.1", "image": "q@sha256:a"}]);
        let t = resolve(
            &after,
            &req("4.19.2"),
            &Version::new(4, 18, 5),
            &Wish::default(),
        )
        .unwrap();
        assert_eq!(
            (t.version.as_str(), t.image.as_str(), t.force),
            ("4.19.2", "q@sha256:b", false)
        );
    }

    #[test]
    fn an_image_must_be_the_offered_one_unless_explicitly_allowed() {
        let c = cv("4.19.7", "stable-4.19", &["4.19.9"]);
        let ops = healthy("4.19.7");
        let same_digest = Wish {
            image: Some("mirror.local/ocp@sha256:4.19.9".into()),
            ..Wish::default()
        };
        let p = decide(&c, &ops, &req("4.19.9"), &same_digest).unwrap();
        assert!(
            matches!(&p.action, Action::Update(t) if t.image == "mirror.local/ocp@sha256:4.19.9" && !t.force)
        );
        let other = Wish {
            image: Some("quay.io/x@sha256:other".into()),
            ..Wish::default()
        };
        let e = decide(&c, &ops, &req("4.19.9"), &other).unwrap_err();
        assert!(matches!(e, Refusal::ImageNotOffered { .. }), "{e}");
        assert!(e.to_string().contains("set allow_explicit_image"), "{e}");
        // Not offered at all: refused without the option, forced with it.
        let e = decide(&c, &ops, &req("4.19.12"), &other).unwrap_err();
        assert!(matches!(e, Refusal::NotOffered { .. }), "{e}");
        let forced = Wish {
            allow_explicit_image: true,
            ..other
        };
        let p = decide(&c, &ops, &req("4.19.12"), &forced).unwrap();
        assert_eq!(
            p.action,
            Action::Update(Target {
                version: "4.19.12".into(),
                image: "quay.io/x@sha256:other".into(),
                force: true
            })
        );
        // The rules still hold for an explicit image.
        assert!(matches!(
            decide(&c, &ops, &req("4.19.6"), &forced),
            Err(Refusal::Lowering { .. })
        ));
    }

    #[test]
    fn progress_counts_operators_at_the_target_and_completes_on_history() {
        let mut c = cv("4.19.7", "stable-4.19", &[]);
        c["status"]["desired"]["version"] = json!("4.19.9");
        c["status"]["history"] = hist(&[("4.19.9", "Partial"), ("4.19.7", "Completed")]);
        set_cond(
            &mut c,
            json!({"type": "Progressing", "status": "True", "reason": "", "message": "Working towards 4.19.9"}),
        );
        let ops = vec![
            op("etcd", "4.19.9", "False", "True"),
            op("dns", "4.19.7", "False", "True"),
            json!({"metadata": {"name": "new"}}),
        ];
        let p = progress(&c, &ops, "4.19.9");
        assert!(!p.done);
        assert_eq!((p.operators_updated, p.operators_total), (1, 3));
        assert_eq!(
            p.pending("4.19.9"),
            "update to 4.19.9: history 4.19.9 Partial, 1 of 3 operators at 4.19.9 (Working towards 4.19.9)"
        );
        assert_eq!(
            completed_at(&c, "4.19.9").unwrap_err(),
            "the newest ClusterVersion history entry is 4.19.9 Partial, not 4.19.9 Completed"
        );
        c["status"]["history"][0]["state"] = json!("Completed");
        assert!(progress(&c, &ops, "4.19.9").done);
        assert_eq!(
            completed_at(&c, "4.19.10").unwrap_err(),
            "ClusterVersion status.desired.version is 4.19.9, not 4.19.10"
        );
    }
}
