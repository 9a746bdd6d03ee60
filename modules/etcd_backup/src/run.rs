//! The backup's reads and writes: the nodes and the etcd pod, the URL Secret and the backup Pod, the wait,
//! the objects read back, retention.

use std::time::{Duration, SystemTime};

use ansible_module::{Failure, Module, Outcome};
use kube_client::known::{nodes, pods, secrets};
use kube_client::{Client, KubeError, Poll, WaitError};
use s3_client::Store;
use serde_json::{json, Value};

use crate::plan::{self, File, PodPlan, PodState, Recorded, Role};
use crate::{store_failure, Options};

pub struct Context<'a> {
    pub store: &'a Store,
    pub prefix: &'a str,
    pub check_mode: bool,
    pub diff_mode: bool,
}

pub struct Take<'a> {
    pub opts: &'a Options,
    pub kube: &'a Client,
    pub timeout: Duration,
    pub interval: Duration,
    pub recorded: &'a [Recorded],
    pub keep: usize,
}

fn kube_failure(what: &str, e: KubeError) -> Failure {
    Failure::new(format!("{what}: {e}"))
}

/// The before/after lists of backup names for diff mode.
fn diff(recorded: &[Recorded], added: Option<&str>, removed: &[String]) -> Value {
    let before: Vec<&str> = recorded.iter().map(|r| r.name.as_str()).collect();
    let mut after: Vec<&str> = before
        .iter()
        .copied()
        .filter(|n| !removed.iter().any(|r| r == n) && Some(*n) != added)
        .collect();
    after.extend(added);
    json!({"before": {"backups": before}, "after": {"backups": after}})
}

/// `state=present`: take the backup, check it in the store, apply retention.
pub fn take(ctx: &Context, t: &Take, m: &mut Module) -> Result<Outcome, Failure> {
    let o = t.opts;
    ctx.store.head_bucket().map_err(|e| store_failure(&e))?;
    let snapshot_key = plan::object_key(ctx.prefix, &o.name, Role::Snapshot);
    if ctx
        .store
        .head_object(&snapshot_key)
        .map_err(|e| store_failure(&e))?
        .is_some()
    {
        return Err(Failure::new(format!(
            "a backup named {} is in the store already ({}): give the new one another name",
            o.name,
            ctx.store.location(&snapshot_key)
        )));
    }
    let nodes = t
        .kube
        .list(&nodes(), None, None)
        .map_err(|e| kube_failure("listing the Nodes", e))?;
    let node =
        plan::pick_node(&nodes, o.node.as_deref()).map_err(|e| Failure::new(e.to_string()))?;
    let image = match &o.image {
        Some(i) if !i.is_empty() => i.clone(),
        _ => etcd_image(t.kube, &o.namespace, &node)?,
    };
    let pruned = plan::to_prune(t.recorded, &o.name, t.keep, ctx.prefix);
    let pruned_names: Vec<String> = pruned.iter().map(|r| r.name.clone()).collect();
    let location = ctx.store.location(&format!("{}/{}/", ctx.prefix, o.name));
    let mut out = Outcome::new(true)
        .with("node", node.clone())
        .with("pruned", json!(pruned_names));
    if ctx.diff_mode {
        out = out.with("diff", diff(t.recorded, Some(&o.name), &pruned_names));
    }
    if ctx.check_mode {
        let backup = json!({"name": o.name, "node": node, "location": location, "files": []});
        return Ok(out.with("backup", backup).msg(format!(
            "would take etcd backup {} on {node} into {location}{}",
            o.name,
            pruned_msg(&pruned_names, "would remove")
        )));
    }
    let taken = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let files = run_pod(ctx, t, m, &node, &image)?;
    check_objects(ctx, o.verify, &files)?;
    for r in &pruned {
        for obj in &r.objects {
            ctx.store.delete_object(obj).map_err(|e| {
                let f = store_failure(&e);
                Failure::new(format!(
                    "backup {} was taken, but retention failed: {}",
                    o.name, f.msg
                ))
                .changed(true)
            })?;
        }
    }
    let size: u64 = files.iter().map(|f| f.size).sum();
    let msg = format!(
        "etcd backup {} taken on {node}: {} files, {} bytes, in {location}{}{}",
        o.name,
        files.len(),
        size,
        if o.verify {
            ", read back and checked (SHA-256)"
        } else {
            ""
        },
        pruned_msg(&pruned_names, "removed")
    );
    let backup = json!({"name": o.name, "node": node, "taken": taken, "location": location,
                        "endpoint_url": o.endpoint_url, "bucket": o.bucket, "files": files});
    Ok(out.with("backup", backup).msg(msg))
}

fn pruned_msg(names: &[String], verb: &str) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!("; retention {verb}: {}", names.join(", "))
    }
}

/// The etcd container's image on `node` ([`plan::etcd_image`]).
fn etcd_image(kube: &Client, ns: &str, node: &str) -> Result<String, Failure> {
    let name = format!("etcd-{node}");
    let pod = kube
        .get(&pods(), Some(ns), &name)
        .map_err(|e| kube_failure(&format!("reading {ns}/{name}"), e))?;
    pod.as_ref().and_then(plan::etcd_image).ok_or_else(|| {
        Failure::new(format!(
            "no etcd static pod {ns}/{name} with an etcd container: is {node} a control-plane node of an \
             OpenShift cluster? (give image to run the backup with another image)"
        ))
    })
}

/// Create the URL Secret and the Pod, wait for the Pod to end, remove the Secret (and the Pod when it
/// succeeded); the files it reports.
fn run_pod(
    ctx: &Context,
    t: &Take,
    m: &mut Module,
    node: &str,
    image: &str,
) -> Result<Vec<File>, Failure> {
    let o = t.opts;
    // The URLs outlive the Pod's deadline by a margin for the uploads' retries, no more.
    let expires = t.timeout + Duration::from_secs(120);
    let urls: Vec<(Role, String)> = Role::ALL
        .iter()
        .map(|r| {
            (
                *r,
                ctx.store.presign_put(
                    &plan::object_key(ctx.prefix, &o.name, *r),
                    expires,
                    SystemTime::now(),
                ),
            )
        })
        .collect();
    for (_, u) in &urls {
        m.add_secret(u.clone());
    }
    let p = PodPlan {
        name: &o.name,
        namespace: &o.namespace,
        node,
        image,
        backup_dir: &o.backup_dir,
        keep_on_node: o.keep_on_node,
        deadline_secs: t.timeout.as_secs(),
    };
    let secrets = secrets();
    let made = t
        .kube
        .create(&secrets, Some(&o.namespace), &plan::url_secret(&p, &urls))
        .map_err(|e| kube_failure(&format!("creating the upload Secret in {}", o.namespace), e))?;
    let secret = made
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let result = create_and_wait(t, &p, &secret);
    let _ = t.kube.delete(&secrets, Some(&o.namespace), &secret);
    let (pod_name, state) = result?;
    match state {
        PodState::Succeeded(message) => {
            let _ = t.kube.delete(&pods(), Some(&o.namespace), &pod_name);
            plan::parse_result(&message, ctx.prefix, &o.name).map_err(|e| Failure::new(e.to_string()).changed(true))
        }
        PodState::Failed(why) => Err(Failure::new(format!(
            "the backup on {node} failed ({why}); the Pod {}/{pod_name} is kept for its log (oc logs -n {} {pod_name}); \
             nothing was recorded",
            o.namespace, o.namespace
        ))
        .changed(true)),
        PodState::Running(_) => unreachable!("create_and_wait returns only an ended Pod"),
    }
}

/// Create the Pod and wait until it has ended; on a timeout the Pod is deleted.
fn create_and_wait(t: &Take, p: &PodPlan, secret: &str) -> Result<(String, PodState), Failure> {
    let pods = pods();
    let made = t
        .kube
        .create(&pods, Some(p.namespace), &plan::pod(p, secret))
        .map_err(|e| {
            kube_failure(&format!("creating the backup Pod in {}", p.namespace), e).changed(true)
        })?;
    let name = made
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    // The Pod's own deadline ends it on the node; the wait allows the kubelet a minute to say so.
    let waited: Result<PodState, WaitError<KubeError>> =
        kube_client::wait_for(t.timeout + Duration::from_secs(60), t.interval, || {
            let pod = t.kube.get(&pods, Some(p.namespace), &name)?;
            Ok(match pod.as_ref().map(plan::pod_state) {
                None => Poll::Ready(PodState::Failed(
                    "the Pod was deleted before it ended".into(),
                )),
                Some(PodState::Running(s)) => {
                    Poll::Pending(format!("backup Pod {}/{name}: {s}", p.namespace))
                }
                Some(ended) => Poll::Ready(ended),
            })
        });
    match waited {
        Ok(state) => Ok((name, state)),
        Err(WaitError::Timeout { pending: last, .. }) => {
            let _ = t.kube.delete(&pods, Some(p.namespace), &name);
            Err(Failure::new(format!(
                "the backup on {} did not end within timeout ({}s; last: {last}); its Pod was deleted",
                p.node,
                t.timeout.as_secs()
            ))
            .changed(true))
        }
        Err(e) => Err(Failure::new(format!(
            "waiting for the backup Pod {}/{name}: {e}",
            p.namespace
        ))
        .changed(true)),
    }
}

/// Each object is in the store with the size the node measured; with `verify`, read back and hashed.
fn check_objects(ctx: &Context, verify: bool, files: &[File]) -> Result<(), Failure> {
    for f in files {
        let where_ = ctx.store.location(&f.object);
        let seen = if verify {
            ctx.store.object_sha256(&f.object)
        } else {
            ctx.store
                .head_object(&f.object)
                .map(|s| s.map(|s| (s, f.sha256.clone())))
        }
        .map_err(|e| store_failure(&e).changed(true))?;
        let problem = match seen {
            None => Some("is not in the store".to_string()),
            Some((size, _)) if size != f.size => {
                Some(format!("holds {size} bytes, the node wrote {}", f.size))
            }
            Some((_, sum)) if sum != f.sha256 => {
                Some(format!("has SHA-256 {sum}, the node computed {}", f.sha256))
            }
            Some(_) => None,
        };
        if let Some(p) = problem {
            return Err(Failure::new(format!(
                "{} ({where_}) {p}: the backup is not usable and was not recorded",
                f.name
            ))
            .changed(true));
        }
    }
    Ok(())
}

/// `state=absent`: the recorded backup's objects deleted from the store.
pub fn remove(ctx: &Context, recorded: &[Recorded], name: &str) -> Result<Outcome, Failure> {
    let Some(r) = recorded.iter().find(|r| r.name == name) else {
        return Ok(Outcome::new(false).msg(format!(
            "no recorded backup named {name}: nothing to remove"
        )));
    };
    let mine: Vec<&String> = r
        .objects
        .iter()
        .filter(|o| o.starts_with(&format!("{}/", ctx.prefix)))
        .collect();
    let mut present = Vec::new();
    for obj in &mine {
        if ctx
            .store
            .head_object(obj)
            .map_err(|e| store_failure(&e))?
            .is_some()
        {
            present.push((*obj).clone());
        }
    }
    let mut out = Outcome::new(!present.is_empty()).with("removed", json!(present));
    if ctx.diff_mode {
        out = out.with("diff", diff(recorded, None, &[name.to_string()]));
    }
    if present.is_empty() {
        return Ok(out.msg(format!("backup {name} has no object left in the store")));
    }
    if !ctx.check_mode {
        for obj in &present {
            ctx.store
                .delete_object(obj)
                .map_err(|e| store_failure(&e))?;
        }
    }
    let verb = if ctx.check_mode {
        "would remove"
    } else {
        "removed"
    };
    Ok(out.msg(format!(
        "backup {name}: {verb} {} objects from the store",
        present.len()
    )))
}
