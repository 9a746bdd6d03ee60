//! `state=lease_acquire|lease_renew|lease_release`: read the lease (KV v2), let [`crate::lease`] decide,
//! write with check-and-set on the version read. A CAS conflict means another run wrote the lease
//! between our read and our write: read again and decide again, once (the other run now holds it, so
//! the second decision refuses, or it released it and ours takes it).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ansible_module::{Failure, Module, Outcome};
use serde_json::{json, Map, Value};
use vault_client::module_options::KvVersions;
use vault_client::{KvVersion, Vault};

use crate::lease::{self, Acquire, Holder, Keep, Lease};
use crate::Options;

/// What one decision asks for.
enum Step {
    Write {
        data: Map<String, Value>,
        msg: String,
        warning: Option<String>,
        previous: Option<Lease>,
    },
    Done(Outcome),
    /// Held by another run: the refusal.
    Refused(String),
}

pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

/// The lease as the result shows it: the stored fields plus readable times.
fn shown(data: &Map<String, Value>, version: Option<u64>) -> Value {
    let mut out = data.clone();
    for key in ["acquired_at", "renewed_at", "expires_at", "released_at"] {
        if let Some(secs) = data.get(key).and_then(Value::as_u64) {
            out.insert(format!("{key}_utc"), json!(rfc3339(secs)));
        }
    }
    out.insert("version".into(), json!(version));
    Value::Object(out)
}

/// One look at the lease: `Ok(Err(refusal))` when another run holds it.
type Attempt = Result<Outcome, String>;

pub(crate) fn run(
    m: &mut Module,
    vault: &Vault,
    kv: &mut KvVersions,
    o: &Options,
) -> Result<Outcome, Failure> {
    let wait = match o.lease_wait {
        w if w < 0 => return Err("lease_wait must be 0 or more (seconds)".into()),
        w => Duration::from_secs(w as u64),
    };
    if o.state != "lease_acquire" || wait.is_zero() || m.check_mode {
        return once(m, vault, kv, o, &o.state)?.map_err(Failure::new);
    }
    // Queue behind the holder: look again every few seconds until it lets go or `lease_wait` runs out.
    let waited = proxshift_http::wait_for(wait, Duration::from_secs(2), || {
        Ok::<_, Failure>(match once(m, vault, kv, o, &o.state)? {
            Ok(out) => proxshift_http::Poll::Ready(out),
            Err(refusal) => proxshift_http::Poll::Pending(refusal),
        })
    });
    match waited {
        Ok(out) => Ok(out),
        Err(proxshift_http::WaitError::Failed(f)) => Err(f),
        Err(
            proxshift_http::WaitError::Timeout { waited, pending }
            | proxshift_http::WaitError::Stopped {
                waited,
                reason: pending,
            },
        ) => Err(Failure::new(format!(
            "waited {}s (lease_wait) and {pending}",
            waited.as_secs()
        ))),
    }
}

/// One look at the lease for `state` (`lease_keep` renews through `lease_renew`).
pub(crate) fn once(
    m: &mut Module,
    vault: &Vault,
    kv: &mut KvVersions,
    o: &Options,
    state: &str,
) -> Result<Attempt, Failure> {
    let mount = o.engine_mount_point.as_str();
    let path = o.path.as_deref().unwrap_or_default();
    let where_ = format!("{mount}/{}", vault_client::clean_path(path));
    if kv.get(vault, mount)? != KvVersion::V2 {
        return Err(Failure::new(format!(
            "state={state}: mount '{mount}' is KV v1, which has no check-and-set; a lease needs a KV v2 mount"
        )));
    }
    let me: Holder = o
        .holder
        .clone()
        .ok_or_else(|| Failure::new(format!("state={state} needs holder")))?;
    if me.run_id.trim().is_empty() {
        return Err("holder.run_id must not be empty".into());
    }
    if o.lease_ttl < 1 {
        return Err("lease_ttl must be at least 1 (seconds)".into());
    }
    let ttl = o.lease_ttl as u64;
    for attempt in 1..=2 {
        let current = vault
            .kv_read(KvVersion::V2, mount, path, None)
            .map_err(|e| Failure::new(format!("reading the lease {where_}: {e}")))?;
        let read_version = current.as_ref().and_then(|s| s.version).unwrap_or(0);
        let held = Lease::from_data(current.as_ref().and_then(|s| s.data.as_ref()));
        let (data, msg, warning, previous) =
            match decide(m, o, state, &where_, held.as_ref(), &me, ttl, read_version)? {
                Step::Done(out) => return Ok(Ok(out)),
                Step::Refused(why) => return Ok(Err(why)),
                Step::Write {
                    data,
                    msg,
                    warning,
                    previous,
                } => (data, msg, warning, previous),
            };
        let result = |version: Option<u64>, msg: String| {
            Outcome::new(true)
                .msg(msg)
                .with("path", where_.clone())
                .with("lease", shown(&data, version))
                .with("taken_over", previous.is_some())
                .with(
                    "previous",
                    previous
                        .as_ref()
                        .map(|p| shown(&p.to_data(), None))
                        .unwrap_or(Value::Null),
                )
        };
        if m.check_mode {
            if let Some(w) = &warning {
                m.warn(w.clone());
            }
            return Ok(Ok(result(
                Some(read_version),
                format!("{msg} (check mode)"),
            )));
        }
        match vault.kv_write(KvVersion::V2, mount, path, &data, Some(read_version)) {
            Ok(version) => {
                if let Some(w) = warning {
                    m.warn(w);
                }
                return Ok(Ok(result(version, msg)));
            }
            Err(e) if e.is_cas_mismatch() && attempt == 1 => continue,
            // Busy: a refusal like a held lease (lease_wait looks again), never a failure of its own.
            Err(e) if e.is_cas_mismatch() => {
                return Ok(Err(format!(
                    "the lease {where_} changed twice while this run was writing it \
                     (check-and-set conflict); nothing was written"
                )))
            }
            Err(e) => return Err(Failure::new(format!("writing the lease {where_}: {e}"))),
        }
    }
    unreachable!("the loop returns on its second attempt")
}

#[allow(clippy::too_many_arguments)]
fn decide(
    m: &mut Module,
    o: &Options,
    state: &str,
    where_: &str,
    held: Option<&Lease>,
    me: &Holder,
    ttl: u64,
    read_version: u64,
) -> Result<Step, Failure> {
    let now = now();
    let phase = o.lease_phase.as_deref().unwrap_or_default();
    let unchanged = |msg: String, lease: Option<&Lease>| {
        Step::Done(
            Outcome::new(false)
                .msg(msg)
                .with("path", where_.to_string())
                .with(
                    "lease",
                    lease
                        .map(|l| shown(&l.to_data(), Some(read_version)))
                        .unwrap_or(Value::Null),
                )
                .with("taken_over", false)
                .with("previous", Value::Null),
        )
    };
    Ok(match state {
        "lease_acquire" => {
            match lease::acquire(held, me, phase, now, ttl, o.lease_break.as_deref()) {
                Acquire::Take(l) => Step::Write {
                    data: l.to_data(),
                    msg: format!("took the lease {where_} for {}", me.describe()),
                    warning: None,
                    previous: None,
                },
                Acquire::TakeOver { lease, previous } => Step::Write {
                    data: lease.to_data(),
                    msg: format!("took over the lease {where_}"),
                    warning: Some(format!(
                        "took over the {} lease {where_} from {}; that run is presumed dead — \
                     check what it left half-done",
                        if previous.expired(now) {
                            "expired"
                        } else {
                            "broken (lease_break)"
                        },
                        lease::describe(&previous, now)
                    )),
                    previous: Some(previous),
                },
                Acquire::Refuse(l) if m.check_mode => {
                    m.warn(lease::refusal(where_, &l, me, now));
                    unchanged(
                        format!("the lease {where_} is held by another run (check mode)"),
                        Some(&l),
                    )
                }
                Acquire::Refuse(l) => Step::Refused(lease::refusal(where_, &l, me, now)),
            }
        }
        "lease_renew" => match lease::renew(held, me, phase, now, ttl) {
            Keep::Write(data) => Step::Write {
                data,
                msg: format!("renewed the lease {where_}"),
                warning: None,
                previous: None,
            },
            Keep::Lost(other) | Keep::NotOurs(other) => {
                return Err(Failure::new(lease::lost(where_, me, other.as_ref(), now)));
            }
        },
        _ if o.lease_break.is_some() => {
            let broken = o.lease_break.as_deref().unwrap_or_default();
            match lease::release_broken(held, broken, me, now) {
                Keep::Write(data) => Step::Write {
                    data,
                    msg: format!("broke the lease {where_} of run {broken} (lease_break)"),
                    warning: Some(format!(
                        "broke the lease {where_} of {} (lease_break): that run is presumed dead",
                        held.map(|l| lease::describe(l, now)).unwrap_or_default()
                    )),
                    previous: held.cloned(),
                },
                Keep::NotOurs(l) | Keep::Lost(l) => unchanged(
                    format!("the lease {where_} is not held by run {broken}; left alone"),
                    l.as_ref(),
                ),
            }
        }
        _ => match lease::release(held, me, now) {
            Keep::Write(data) => Step::Write {
                data,
                msg: format!("released the lease {where_}"),
                warning: None,
                previous: None,
            },
            Keep::NotOurs(Some(l)) | Keep::Lost(Some(l)) => {
                m.warn(format!(
                    "the lease {where_} is not this run's to release: it is held by {}",
                    lease::describe(&l, now)
                ));
                unchanged(
                    format!("the lease {where_} is not held by this run"),
                    Some(&l),
                )
            }
            Keep::NotOurs(None) | Keep::Lost(None) => {
                unchanged(format!("the lease {where_} is already free"), None)
            }
        },
    })
}

/// What one renewal by the run's keeper came to.
#[derive(Debug)]
pub(crate) enum KeepStep {
    /// Renewed: the new expiry (Unix seconds).
    Renewed(u64),
    /// This run released the lease: the keeper's work is done.
    Released,
    /// The run lost the lease: why, in a sentence.
    Lost(String),
}

/// One renewal by the run's keeper (`state=lease_keep`): read, [`lease::keep`], write by check-and-set on
/// the version read; a conflict (the run's own phase renewal, or another run) is decided again once.
pub(crate) fn keep_once(
    vault: &Vault,
    mount: &str,
    path: &str,
    me: &Holder,
    ttl: u64,
) -> Result<KeepStep, vault_client::Error> {
    let where_ = format!("{mount}/{}", vault_client::clean_path(path));
    let mut step = KeepStep::Lost(format!(
        "the lease {where_} changed twice while it was renewed"
    ));
    for attempt in 1..=2 {
        let current = vault.kv_read(KvVersion::V2, mount, path, None)?;
        let version = current.as_ref().and_then(|s| s.version).unwrap_or(0);
        let now = now();
        step = match lease::keep(current.as_ref().and_then(|s| s.data.as_ref()), me, now, ttl) {
            lease::Kept::Released => KeepStep::Released,
            lease::Kept::Lost(other) => {
                KeepStep::Lost(lease::lost(&where_, me, other.as_ref(), now))
            }
            lease::Kept::Write(data) => {
                match vault.kv_write(KvVersion::V2, mount, path, &data, Some(version)) {
                    Ok(_) => KeepStep::Renewed(now.saturating_add(ttl)),
                    Err(e) if e.is_cas_mismatch() && attempt == 1 => continue,
                    Err(e) => return Err(e),
                }
            }
        };
        break;
    }
    Ok(step)
}
