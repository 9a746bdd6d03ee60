//! What a task does to each VM, decided from the VMs as they are (pure): which VMs are touched,
//! which snapshots are made, removed or rolled back to, what retention prunes, what refuses the
//! whole task before any write, and the snapshot lists before and after (check mode's prediction
//! and the diff).

use serde_json::{json, Map, Value};
use vm_lifecycle::model::Inventory;

use crate::options::{Settings, State};

/// The line every snapshot this module takes carries in its description: retention only ever
/// removes snapshots with it.
pub const MARKER: &str = "[proxshift.proxmox.proxmox_snap]";

/// One snapshot of `GET /nodes/{node}/qemu/{vmid}/snapshot` (qemu-server's `snapshot_list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub name: String,
    /// Seconds since the epoch (0 when PVE gave none).
    pub snaptime: u64,
    pub description: String,
    pub vmstate: bool,
    pub parent: Option<String>,
}

impl Snapshot {
    /// Made by this module: its description holds [`MARKER`] on a line of its own.
    pub fn is_ours(&self) -> bool {
        self.description.lines().any(|l| l.trim() == MARKER)
    }

    /// The snapshots of a listing, without its last entry `current` (the VM as it is now).
    pub fn from_listing(list: &[Value]) -> Vec<Snapshot> {
        list.iter()
            .filter_map(|s| {
                let name = s.get("name")?.as_str()?;
                (name != "current").then(|| Snapshot {
                    name: name.to_string(),
                    snaptime: s
                        .get("snaptime")
                        .and_then(pve_client::value_u64)
                        .unwrap_or(0),
                    description: s
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    vmstate: s
                        .get("vmstate")
                        .and_then(pve_client::value_u64)
                        .is_some_and(|v| v != 0),
                    parent: s.get("parent").and_then(Value::as_str).map(str::to_string),
                })
            })
            .collect()
    }
}

/// The description a new snapshot gets: the task's text, then the marker.
pub fn description_with_marker(description: Option<&str>) -> String {
    match description.map(str::trim_end) {
        Some(d) if !d.is_empty() => format!("{d}\n{MARKER}"),
        _ => MARKER.to_string(),
    }
}

/// A VM of the task with what the plan needs to know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub vm: Inventory,
    pub running: bool,
    pub lock: Option<String>,
    pub snapshots: Vec<Snapshot>,
    /// Whether every disk can take a snapshot (Proxmox's `feature` check), asked only of a VM
    /// the task would snapshot.
    pub can_snapshot: Option<bool>,
}

/// One write to one VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Create,
    /// Remove a snapshot: the task's own (`state=absent`) or one retention prunes.
    Delete(String),
    Rollback,
}

/// What happens to one VM.
#[derive(Debug, Clone, PartialEq)]
pub struct VmPlan {
    pub vm: Inventory,
    pub steps: Vec<Step>,
    /// Snapshot names, oldest first, before and (predicted) after the steps.
    pub before: Vec<String>,
    pub after: Vec<String>,
    /// The VM already has the snapshot (`present`) or has none (`absent`).
    pub already: bool,
    /// A running VM the rollback stops (only with `force`).
    pub stops_running: bool,
}

impl VmPlan {
    pub fn changes(&self) -> bool {
        !self.steps.is_empty()
    }
}

/// Why the task is refused before any write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no VM carries the tags {0}")]
    NoVms(String),
    #[error(
        "{0} does not carry the owner tag '{1}': proxmox_snap changes only VMs carrying it \
         (set owner_tag, or tag the VM)"
    )]
    NotOwned(String, String),
    #[error("{vm} is locked ({lock}); Proxmox takes no snapshot action on a locked VM")]
    Locked { vm: String, lock: String },
    #[error(
        "{0} cannot be snapshotted: a disk is on a storage without snapshots (a raw file on a \
         directory, NFS or CIFS storage, plain LVM, iSCSI) — move it to LVM-thin, ZFS, Ceph RBD \
         or qcow2 first"
    )]
    NoSnapshotFeature(String),
    #[error("{0} has no snapshot '{1}' to roll back to")]
    NoSnapshot(String, String),
    #[error(
        "{0} is running: a rollback stops it hard (Proxmox stops a running VM without shutting its \
         guest down) — shut it down first, or set force=true"
    )]
    Running(String),
}

/// Every refusal of a task, reported together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nothing was changed: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct Refusals(pub Vec<Refusal>);

/// The VMs the task acts on: the selected ones carrying `owner_tag`. A VM named by `vmid` or
/// `hostname` without it refuses the task; VMs matching `tags` without it are returned apart, to
/// be reported and left alone.
pub fn owned(
    selected: Vec<Inventory>,
    by_tags: bool,
    owner_tag: &str,
) -> Result<(Vec<Inventory>, Vec<Inventory>), Refusals> {
    let (mine, others): (Vec<Inventory>, Vec<Inventory>) =
        selected.into_iter().partition(|vm| vm.has_tag(owner_tag));
    if !by_tags && !others.is_empty() {
        return Err(Refusals(
            others
                .iter()
                .map(|vm| Refusal::NotOwned(vm.label(), owner_tag.to_string()))
                .collect(),
        ));
    }
    Ok((mine, others))
}

/// Plan every VM, or refuse the task: a locked VM that would be written to, a VM to snapshot whose
/// disks cannot take one (so no set is left half made), and for a rollback a VM without the
/// snapshot or running without `force`.
pub fn plan(targets: &[Target], s: &Settings) -> Result<Vec<VmPlan>, Refusals> {
    let mut refusals = Vec::new();
    let mut plans = Vec::new();
    for t in targets {
        let p = plan_one(t, s);
        let label = t.vm.label();
        if let (true, Some(lock)) = (p.changes(), &t.lock) {
            refusals.push(Refusal::Locked {
                vm: label.clone(),
                lock: lock.clone(),
            });
        }
        if p.steps.contains(&Step::Create) && t.can_snapshot == Some(false) {
            refusals.push(Refusal::NoSnapshotFeature(label.clone()));
        }
        if s.state == State::Rollback {
            if !has(t, &s.snapname) {
                refusals.push(Refusal::NoSnapshot(label.clone(), s.snapname.clone()));
            } else if t.running && !s.force {
                refusals.push(Refusal::Running(label));
            }
        }
        plans.push(p);
    }
    if refusals.is_empty() {
        Ok(plans)
    } else {
        Err(Refusals(refusals))
    }
}

fn has(t: &Target, name: &str) -> bool {
    t.snapshots.iter().any(|s| s.name == name)
}

fn names(snaps: &[Snapshot]) -> Vec<String> {
    snaps.iter().map(|s| s.name.clone()).collect()
}

fn plan_one(t: &Target, s: &Settings) -> VmPlan {
    let before = names(&t.snapshots);
    let exists = has(t, &s.snapname);
    let mut steps = Vec::new();
    let mut after = t.snapshots.clone();
    match s.state {
        State::Present => {
            if !exists {
                steps.push(Step::Create);
                after.push(Snapshot {
                    name: s.snapname.clone(),
                    // Taken now: newer than any snapshot listed.
                    snaptime: u64::MAX,
                    description: description_with_marker(s.description.as_deref()),
                    vmstate: s.vmstate && t.running,
                    parent: None,
                });
            }
            for gone in pruned(&after, s) {
                after.retain(|x| x.name != gone);
                steps.push(Step::Delete(gone));
            }
        }
        State::Absent if exists => {
            steps.push(Step::Delete(s.snapname.clone()));
            after.retain(|x| x.name != s.snapname);
        }
        State::Absent => {}
        State::Rollback => steps.push(Step::Rollback),
    }
    VmPlan {
        vm: t.vm.clone(),
        already: match s.state {
            State::Present => exists,
            State::Absent => !exists,
            State::Rollback => false,
        },
        stops_running: s.state == State::Rollback && t.running,
        steps,
        before,
        after: names(&after),
    }
}

/// Retention: of this module's snapshots named with the prefix, the ones beyond the `retention`
/// newest (by `snaptime`, then name), oldest first. The task's own snapshot is always kept.
pub fn pruned(snaps: &[Snapshot], s: &Settings) -> Vec<String> {
    if s.retention == 0 {
        return Vec::new();
    }
    let mut series: Vec<&Snapshot> = snaps
        .iter()
        .filter(|x| x.is_ours() && x.name.starts_with(&s.prefix))
        .collect();
    // Newest first; the task's own snapshot counts as the newest.
    series.sort_by(|a, b| {
        let own = |x: &Snapshot| x.name == s.snapname;
        (own(b), b.snaptime, &b.name).cmp(&(own(a), a.snaptime, &a.name))
    });
    let mut gone: Vec<&Snapshot> = series.into_iter().skip(s.retention).collect();
    gone.reverse();
    gone.into_iter().map(|x| x.name.clone()).collect()
}

/// The diff of the whole task: each VM's snapshot names before and after, keyed by its label.
pub fn diff(plans: &[VmPlan]) -> (Value, Value) {
    let mut before = Map::new();
    let mut after = Map::new();
    for p in plans {
        before.insert(p.vm.label(), json!(p.before));
        after.insert(p.vm.label(), json!(p.after));
    }
    (Value::Object(before), Value::Object(after))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn settings(state: State, snapname: &str, retention: usize) -> Settings {
        Settings {
            state,
            snapname: snapname.into(),
            description: None,
            vmstate: false,
            retention,
            prefix: crate::options::default_prefix(snapname).into(),
            force: false,
            owner_tag: "proxshift-c1".into(),
            timeout: Duration::from_secs(60),
        }
    }

    fn vm(vmid: u32, tags: &[&str]) -> Inventory {
        Inventory {
            vmid,
            name: format!("c1-m{vmid}"),
            node: "pve1".into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            template: false,
            status: "stopped".into(),
            container: false,
        }
    }

    fn snap(name: &str, snaptime: u64, ours: bool) -> Snapshot {
        Snapshot {
            name: name.into(),
            snaptime,
            description: if ours {
                description_with_marker(Some("restore point"))
            } else {
                "by hand".into()
            },
            vmstate: false,
            parent: None,
        }
    }

    fn target(vmid: u32, snaps: Vec<Snapshot>) -> Target {
        Target {
            vm: vm(vmid, &["proxshift-c1"]),
            running: false,
            lock: None,
            snapshots: snaps,
            can_snapshot: Some(true),
        }
    }

    #[test]
    fn the_listing_drops_current_and_reads_pve_numbers_and_flags() {
        let list = json!([
            {"name": "a", "snaptime": 1700000000, "description": "x", "vmstate": 1},
            {"name": "b", "snaptime": "1700000100", "description": MARKER, "parent": "a", "vmstate": 0},
            {"name": "current", "running": 0, "parent": "b", "description": "You are here!"}
        ]);
        let snaps = Snapshot::from_listing(list.as_array().unwrap());
        assert_eq!(snaps.len(), 2);
        assert!(snaps[0].vmstate && !snaps[0].is_ours());
        assert_eq!(snaps[1].snaptime, 1_700_000_100);
        assert_eq!(snaps[1].parent.as_deref(), Some("a"));
        assert!(snaps[1].is_ours());
    }

    #[test]
    fn the_marker_follows_the_description() {
        assert_eq!(description_with_marker(None), MARKER);
        assert_eq!(
            description_with_marker(Some("4.19.7 \n")),
            format!("4.19.7\n{MARKER}")
        );
    }

    #[test]
    fn present_creates_where_missing_and_is_idempotent() {
        let s = settings(State::Present, "restore-2", 0);
        let plans = plan(
            &[
                target(101, vec![snap("restore-2", 10, true)]),
                target(102, vec![]),
            ],
            &s,
        )
        .unwrap();
        assert!(plans[0].steps.is_empty() && plans[0].already);
        assert_eq!(plans[1].steps, vec![Step::Create]);
        assert_eq!(plans[1].after, vec!["restore-2"]);
    }

    #[test]
    fn retention_prunes_only_our_snapshots_of_the_series_oldest_first() {
        let s = settings(State::Present, "restore-4", 2);
        let snaps = vec![
            snap("restore-1", 10, true),
            snap("restore-manual", 5, false),
            snap("restore-2", 20, true),
            snap("nightly-1", 1, true),
            snap("restore-3", 30, true),
        ];
        let p = &plan(&[target(101, snaps)], &s).unwrap()[0];
        assert_eq!(
            p.steps,
            vec![
                Step::Create,
                Step::Delete("restore-1".into()),
                Step::Delete("restore-2".into())
            ]
        );
        assert_eq!(
            p.after,
            vec!["restore-manual", "nightly-1", "restore-3", "restore-4"]
        );
    }

    #[test]
    fn retention_keeps_the_tasks_own_snapshot_even_when_older() {
        let s = settings(State::Present, "restore-1", 1);
        let snaps = vec![snap("restore-1", 10, true), snap("restore-2", 20, true)];
        let p = &plan(&[target(101, snaps)], &s).unwrap()[0];
        assert_eq!(p.steps, vec![Step::Delete("restore-2".into())]);
    }

    #[test]
    fn absent_deletes_only_where_present() {
        let s = settings(State::Absent, "restore-1", 0);
        let plans = plan(
            &[
                target(101, vec![snap("restore-1", 1, false)]),
                target(102, vec![]),
            ],
            &s,
        )
        .unwrap();
        assert_eq!(plans[0].steps, vec![Step::Delete("restore-1".into())]);
        assert!(plans[1].steps.is_empty() && plans[1].already);
    }

    #[test]
    fn a_rollback_is_refused_before_any_write_when_one_vm_cannot_take_it() {
        let mut s = settings(State::Rollback, "restore-1", 0);
        let mut running = target(103, vec![snap("restore-1", 1, true)]);
        running.running = true;
        let mut locked = target(102, vec![snap("restore-1", 1, true)]);
        locked.lock = Some("backup".into());
        let targets = [target(101, vec![]), locked, running.clone()];
        let err = plan(&targets, &s).unwrap_err();
        assert_eq!(
            err.0,
            vec![
                Refusal::NoSnapshot("c1-m101 (101)".into(), "restore-1".into()),
                Refusal::Locked {
                    vm: "c1-m102 (102)".into(),
                    lock: "backup".into()
                },
                Refusal::Running("c1-m103 (103)".into()),
            ]
        );
        assert!(err.to_string().starts_with("nothing was changed: "));
        s.force = true;
        let p = &plan(&[running], &s).unwrap()[0];
        assert!(p.stops_running);
        assert_eq!(p.steps, vec![Step::Rollback]);
    }

    #[test]
    fn a_set_is_refused_whole_when_one_vm_cannot_take_a_snapshot() {
        let s = settings(State::Present, "restore-2", 0);
        let mut raw = target(102, vec![]);
        raw.can_snapshot = Some(false);
        let mut done = target(103, vec![snap("restore-2", 1, true)]);
        done.can_snapshot = Some(false); // has it already: nothing to take
        let err = plan(&[target(101, vec![]), raw, done.clone()], &s).unwrap_err();
        assert_eq!(
            err.0,
            vec![Refusal::NoSnapshotFeature("c1-m102 (102)".into())]
        );
        assert!(
            err.to_string()
                .starts_with("nothing was changed: c1-m102 (102) cannot be snapshotted"),
            "{err}"
        );
        assert!(plan(&[done], &s).is_ok());
    }

    #[test]
    fn a_locked_vm_with_nothing_to_do_is_no_refusal() {
        let s = settings(State::Present, "restore-1", 0);
        let mut t = target(101, vec![snap("restore-1", 1, true)]);
        t.lock = Some("backup".into());
        assert!(plan(&[t], &s).is_ok());
    }

    #[test]
    fn only_owned_vms_are_acted_on() {
        let mine = vm(101, &["proxshift-c1"]);
        let stray = vm(102, &["c1"]);
        let (acts, left) = owned(vec![mine.clone(), stray.clone()], true, "proxshift-c1").unwrap();
        assert_eq!((acts, left), (vec![mine], vec![stray.clone()]));
        let err = owned(vec![stray], false, "proxshift-c1").unwrap_err();
        assert!(matches!(err.0.as_slice(), [Refusal::NotOwned(..)]));
    }

    #[test]
    fn the_diff_lists_each_vms_snapshots() {
        let s = settings(State::Present, "restore-1", 0);
        let plans = plan(&[target(101, vec![snap("old", 1, false)])], &s).unwrap();
        let (before, after) = diff(&plans);
        assert_eq!(before, json!({"c1-m101 (101)": ["old"]}));
        assert_eq!(after, json!({"c1-m101 (101)": ["old", "restore-1"]}));
    }
}
