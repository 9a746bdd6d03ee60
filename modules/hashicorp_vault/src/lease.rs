//! A cluster's lease: one writer per cluster at a time (`state=lease_acquire`, `lease_renew`,
//! `lease_release`). Pure: what to do with the lease Vault holds, what to write, what to tell the
//! user. `lib.rs` reads the lease (KV v2), asks here, and writes with check-and-set on the version it
//! read, so of two runs that read the same free lease exactly one write succeeds.
//!
//! The lease is a KV v2 secret of its own (beside the cluster's record, never inside it, so renewing
//! it never races a record write): `holder` (`run_id`, `host`, `job_id`), `phase`, `acquired_at`,
//! `renewed_at`, `expires_at` (Unix seconds). A released lease keeps `released_at` and `last_holder`
//! and has no `holder`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who holds a lease: the run (a random id per playbook run), the machine, the AWX job when there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub run_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job_id: String,
}

impl Holder {
    /// `run 3f2a… on host ctl1 (AWX job 812)`.
    pub fn describe(&self) -> String {
        let mut s = format!("run {}", self.run_id);
        if !self.host.is_empty() {
            s.push_str(&format!(" on host {}", self.host));
        }
        if !self.job_id.is_empty() {
            s.push_str(&format!(" (AWX job {})", self.job_id));
        }
        s
    }
}

/// A held lease as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub holder: Holder,
    #[serde(default)]
    pub phase: String,
    pub acquired_at: u64,
    pub renewed_at: u64,
    pub expires_at: u64,
}

impl Lease {
    /// The held lease in a secret's data; `None` for no secret, a deleted one, a released lease, or data
    /// that is not a lease (a lease that cannot be read holds nothing: it never blocks a cluster for good).
    pub fn from_data(data: Option<&Map<String, Value>>) -> Option<Lease> {
        let d = data?;
        d.get("holder")?;
        serde_json::from_value(Value::Object(d.clone())).ok()
    }

    pub fn to_data(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        }
    }

    pub fn expired(&self, now: u64) -> bool {
        now >= self.expires_at
    }

    fn held_by(&self, me: &Holder) -> bool {
        self.holder.run_id == me.run_id
    }
}

/// What acquiring does with the lease that is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// Free (never taken, released, unreadable) or already ours: write this lease.
    Take(Lease),
    /// Held by a run whose lease expired: write this lease, and warn naming the run it replaces.
    TakeOver { lease: Lease, previous: Lease },
    /// Held by another run, not expired.
    Refuse(Lease),
}

/// What renewing or releasing does with the lease that is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keep {
    /// Ours: write this (a renewed lease, or the released form).
    Write(Map<String, Value>),
    /// Releasing a lease that is no longer ours, or is free already: nothing to write.
    NotOurs(Option<Lease>),
    /// Renewing a lease another run holds now (ours expired and was taken over) or nobody holds.
    Lost(Option<Lease>),
}

/// `broken`: the run id of a holder the user declares dead (`lease_break`, as `terraform force-unlock
/// LOCK_ID`): its lease is taken over before it expires. Any other holder is still refused.
pub fn acquire(
    current: Option<&Lease>,
    me: &Holder,
    phase: &str,
    now: u64,
    ttl: u64,
    broken: Option<&str>,
) -> Acquire {
    let fresh = |acquired_at: u64| Lease {
        holder: me.clone(),
        phase: phase.to_string(),
        acquired_at,
        renewed_at: now,
        expires_at: now.saturating_add(ttl),
    };
    match current {
        None => Acquire::Take(fresh(now)),
        Some(l) if l.held_by(me) => Acquire::Take(fresh(l.acquired_at)),
        Some(l) if l.expired(now) || broken == Some(l.holder.run_id.as_str()) => {
            Acquire::TakeOver {
                lease: fresh(now),
                previous: l.clone(),
            }
        }
        Some(l) => Acquire::Refuse(l.clone()),
    }
}

/// Renew our lease: a new expiry and the phase the run is in. An expired lease that is still ours (no
/// other run took it over) is renewed: nothing else happened meanwhile.
pub fn renew(current: Option<&Lease>, me: &Holder, phase: &str, now: u64, ttl: u64) -> Keep {
    match current {
        Some(l) if l.held_by(me) => {
            let renewed = Lease {
                phase: if phase.is_empty() {
                    l.phase.clone()
                } else {
                    phase.to_string()
                },
                renewed_at: now,
                expires_at: now.saturating_add(ttl),
                ..l.clone()
            };
            Keep::Write(renewed.to_data())
        }
        other => Keep::Lost(other.cloned()),
    }
}

/// Release our lease: the secret keeps who held it last and when it was let go.
pub fn release(current: Option<&Lease>, me: &Holder, now: u64) -> Keep {
    match current {
        Some(l) if l.held_by(me) => {
            let mut m = Map::new();
            m.insert("released_at".into(), Value::from(now));
            m.insert(
                "last_holder".into(),
                serde_json::to_value(&l.holder).unwrap_or(Value::Null),
            );
            m.insert("phase".into(), Value::from(l.phase.clone()));
            Keep::Write(m)
        }
        other => Keep::NotOurs(other.cloned()),
    }
}

/// What the run's lease keeper (`state=lease_keep`) does with the lease that is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// Still ours: write this renewal (the phase kept).
    Write(Map<String, Value>),
    /// This run released it (the end of the run): the keeper's work is done.
    Released,
    /// Another run holds it now, or nobody and not by our release: the run lost it.
    Lost(Option<Lease>),
}

/// The keeper's decision on the lease's stored data (`None`: no secret).
pub fn keep(data: Option<&Map<String, Value>>, me: &Holder, now: u64, ttl: u64) -> Kept {
    let held = Lease::from_data(data);
    match renew(held.as_ref(), me, "", now, ttl) {
        Keep::Write(m) => Kept::Write(m),
        Keep::Lost(None) | Keep::NotOurs(None) if released_by(data, me) => Kept::Released,
        Keep::Lost(other) | Keep::NotOurs(other) => Kept::Lost(other),
    }
}

fn released_by(data: Option<&Map<String, Value>>, me: &Holder) -> bool {
    data.and_then(|d| d.get("last_holder"))
        .and_then(|h| h.get("run_id"))
        .and_then(Value::as_str)
        == Some(me.run_id.as_str())
}

/// How often the keeper renews: a third of the TTL, so two renewals can fail before the lease expires
/// (client-go's leader election likewise renews well inside its lease duration), at least every second.
pub fn renew_every(ttl: u64) -> u64 {
    (ttl / 3).max(1)
}

/// Break the lease of a run the user declares dead (`state=lease_release` with `lease_break`): freed when
/// that run holds it (the secret keeps it as `last_holder` and who broke it), left alone otherwise — a
/// run breaking the cluster's lease frees every other lease the dead run held (its placement lease).
pub fn release_broken(current: Option<&Lease>, broken: &str, me: &Holder, now: u64) -> Keep {
    match current {
        Some(l) if l.holder.run_id == broken => {
            let Keep::Write(mut m) = release(Some(l), &l.holder, now) else {
                unreachable!("a lease is always its holder's to release")
            };
            m.insert(
                "broken_by".into(),
                serde_json::to_value(me).unwrap_or(Value::Null),
            );
            Keep::Write(m)
        }
        other => Keep::NotOurs(other.cloned()),
    }
}

/// `1h 2m 5s`, `40s`.
pub fn duration(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m {s}s"),
        _ => format!("{h}h {m}m {s}s"),
    }
}

/// One sentence about a lease held by someone: who, which phase, how old, when it expires.
pub fn describe(l: &Lease, now: u64) -> String {
    let phase = if l.phase.is_empty() {
        String::new()
    } else {
        format!(", in phase {}", l.phase)
    };
    let expiry = if l.expired(now) {
        format!("expired {} ago", duration(now.saturating_sub(l.expires_at)))
    } else {
        format!("expires in {}", duration(l.expires_at - now))
    };
    format!(
        "{}{phase}, taken {} ago, last renewed {} ago, {expiry}",
        l.holder.describe(),
        duration(now.saturating_sub(l.acquired_at)),
        duration(now.saturating_sub(l.renewed_at)),
    )
}

/// What a run that lost its lease is told: who holds it now, and that it stops.
pub fn lost(where_: &str, me: &Holder, other: Option<&Lease>, now: u64) -> String {
    let who = other
        .map(|l| format!("it is held by {}", describe(l, now)))
        .unwrap_or_else(|| "nobody holds it".into());
    format!(
        "this run ({}) no longer holds the lease {where_}: {who}. It expired and was taken over, or was \
         released; stopping before writing anything more",
        me.describe()
    )
}

/// The refusal a second run sees.
pub fn refusal(where_: &str, l: &Lease, me: &Holder, now: u64) -> String {
    format!(
        "the cluster is held by another run: the lease {where_} is held by {}. This run ({}) wrote nothing. \
         Wait for that run to finish; if it died, the lease is taken over once it expires, or at once by a run \
         given its run id to break (playbooks: -e proxshift_lease_break={}).",
        describe(l, now),
        me.describe(),
        l.holder.run_id
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn me() -> Holder {
        Holder {
            run_id: "run-b".into(),
            host: "ctl2".into(),
            job_id: String::new(),
        }
    }

    fn other(expires_at: u64) -> Lease {
        Lease {
            holder: Holder {
                run_id: "run-a".into(),
                host: "ctl1".into(),
                job_id: "812".into(),
            },
            phase: "vms".into(),
            acquired_at: 1000,
            renewed_at: 1100,
            expires_at,
        }
    }

    #[test]
    fn a_free_lease_is_taken() {
        let a = acquire(None, &me(), "preflight", 2000, 600, None);
        let Acquire::Take(l) = a else { panic!("{a:?}") };
        assert_eq!(
            (l.acquired_at, l.renewed_at, l.expires_at),
            (2000, 2000, 2600)
        );
        assert_eq!(l.holder, me());
        assert_eq!(l.phase, "preflight");
    }

    #[test]
    fn a_lease_held_by_another_run_is_refused_until_it_expires() {
        assert_eq!(
            acquire(Some(&other(2001)), &me(), "", 2000, 600, None),
            Acquire::Refuse(other(2001))
        );
        let a = acquire(Some(&other(2000)), &me(), "", 2000, 600, None);
        let Acquire::TakeOver { lease, previous } = a else {
            panic!("{a:?}")
        };
        assert_eq!(previous, other(2000));
        assert_eq!(lease.holder, me());
        assert_eq!(lease.acquired_at, 2000);
    }

    #[test]
    fn a_lease_is_broken_only_for_the_run_named() {
        let a = acquire(Some(&other(9000)), &me(), "", 2000, 600, Some("run-a"));
        assert!(matches!(a, Acquire::TakeOver { .. }), "{a:?}");
        let a = acquire(Some(&other(9000)), &me(), "", 2000, 600, Some("run-x"));
        assert_eq!(a, Acquire::Refuse(other(9000)));
    }

    #[test]
    fn our_own_lease_is_taken_again_keeping_its_start() {
        let mut mine = other(1500);
        mine.holder = me();
        let Acquire::Take(l) = acquire(Some(&mine), &me(), "vms", 2000, 600, None) else {
            panic!()
        };
        assert_eq!(
            (l.acquired_at, l.expires_at, l.phase.as_str()),
            (1000, 2600, "vms")
        );
    }

    #[test]
    fn renew_moves_the_expiry_and_the_phase_only_for_the_holder() {
        let mut mine = other(2100);
        mine.holder = me();
        let Keep::Write(d) = renew(Some(&mine), &me(), "start", 2050, 600) else {
            panic!()
        };
        let l = Lease::from_data(Some(&d)).unwrap();
        assert_eq!(
            (l.renewed_at, l.expires_at, l.phase.as_str()),
            (2050, 2650, "start")
        );
        assert_eq!(l.acquired_at, 1000);
        let Keep::Write(d) = renew(Some(&mine), &me(), "", 2050, 600) else {
            panic!()
        };
        assert_eq!(Lease::from_data(Some(&d)).unwrap().phase, "vms");
        assert_eq!(
            renew(Some(&other(2100)), &me(), "start", 2050, 600),
            Keep::Lost(Some(other(2100)))
        );
        assert_eq!(renew(None, &me(), "start", 2050, 600), Keep::Lost(None));
    }

    #[test]
    fn release_frees_only_our_lease_and_keeps_who_held_it() {
        let mut mine = other(2100);
        mine.holder = me();
        let Keep::Write(d) = release(Some(&mine), &me(), 2050) else {
            panic!()
        };
        assert_eq!(
            Lease::from_data(Some(&d)),
            None,
            "a released lease holds nothing"
        );
        assert_eq!(d["last_holder"]["run_id"], json!("run-b"));
        assert_eq!(d["released_at"], json!(2050));
        assert_eq!(
            release(Some(&other(2100)), &me(), 2050),
            Keep::NotOurs(Some(other(2100)))
        );
        assert_eq!(release(None, &me(), 2050), Keep::NotOurs(None));
    }

    #[test]
    fn the_keeper_renews_ours_stops_at_our_release_and_reports_a_loss() {
        let mut mine = other(2100);
        mine.holder = me();
        let Kept::Write(d) = keep(Some(&mine.to_data()), &me(), 2050, 30) else {
            panic!()
        };
        let l = Lease::from_data(Some(&d)).unwrap();
        assert_eq!((l.expires_at, l.phase.as_str()), (2080, "vms"));
        let Keep::Write(released) = release(Some(&mine), &me(), 2060) else {
            panic!()
        };
        assert_eq!(keep(Some(&released), &me(), 2070, 30), Kept::Released);
        assert_eq!(
            keep(Some(&other(2100).to_data()), &me(), 2050, 30),
            Kept::Lost(Some(other(2100)))
        );
        assert_eq!(keep(None, &me(), 2050, 30), Kept::Lost(None));
        let theirs = release(Some(&other(2100)), &other(2100).holder, 2060);
        let Keep::Write(theirs) = theirs else {
            panic!()
        };
        assert_eq!(keep(Some(&theirs), &me(), 2070, 30), Kept::Lost(None));
        assert_eq!(
            (renew_every(1800), renew_every(3), renew_every(1)),
            (600, 1, 1)
        );
    }

    #[test]
    fn a_broken_release_frees_only_the_dead_runs_lease() {
        let Keep::Write(d) = release_broken(Some(&other(9000)), "run-a", &me(), 2000) else {
            panic!()
        };
        assert_eq!(Lease::from_data(Some(&d)), None);
        assert_eq!(d["last_holder"]["run_id"], json!("run-a"));
        assert_eq!(d["broken_by"]["run_id"], json!("run-b"));
        assert_eq!(
            release_broken(Some(&other(9000)), "run-x", &me(), 2000),
            Keep::NotOurs(Some(other(9000)))
        );
        assert_eq!(
            release_broken(None, "run-a", &me(), 2000),
            Keep::NotOurs(None)
        );
    }

    #[test]
    fn data_that_is_not_a_lease_holds_nothing() {
        let m = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(Lease::from_data(None), None);
        assert_eq!(Lease::from_data(Some(&m(json!({"holder": "x"})))), None);
        assert_eq!(Lease::from_data(Some(&m(json!({"released_at": 3})))), None);
        let l = other(5);
        assert_eq!(Lease::from_data(Some(&l.to_data())), Some(l));
    }

    #[test]
    fn the_refusal_names_the_holder_and_the_age() {
        let msg = refusal(
            "secret/openshift/clusters/demo/lease",
            &other(2600),
            &me(),
            2125,
        );
        assert!(
            msg.contains("run run-a on host ctl1 (AWX job 812)"),
            "{msg}"
        );
        assert!(msg.contains("in phase vms"), "{msg}");
        assert!(msg.contains("taken 18m 45s ago"), "{msg}");
        assert!(msg.contains("last renewed 17m 5s ago"), "{msg}");
        assert!(msg.contains("expires in 7m 55s"), "{msg}");
        assert!(
            msg.contains("This run (run run-b on host ctl2) wrote nothing"),
            "{msg}"
        );
        assert!(describe(&other(2000), 9200).contains("expired 2h 0m 0s ago"));
        assert_eq!(duration(59), "59s");
    }
}
