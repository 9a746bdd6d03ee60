//! The rules of an etcd backup, pure: which node takes it, the Pod that runs `cluster-backup.sh` there
//! (OpenShift's documented backup: "Backing up etcd data", `oc debug --as-root node/<node>`, `chroot
//! /host`, `/usr/local/bin/cluster-backup.sh <dir>`), where its two files go in the object store, how
//! the Pod's outcome reads, and which earlier backups retention removes.

use serde::Serialize;
use serde_json::{json, Value};

/// The labels every object of a backup run carries (a later run or a person finds leftovers by them).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "proxshift");
pub const BACKUP_LABEL: &str = "proxshift.io/etcd-backup";
const CONTAINER: &str = "backup";

/// The two files `cluster-backup.sh` writes (openshift/cluster-etcd-operator
/// `bindata/etcd/cluster-backup.sh`): `snapshot_<date>.db` (`etcdctl snapshot save`) and
/// `static_kuberesources_<date>.tar.gz` (the latest static pod resources of the kube-apiserver, the
/// kube-controller-manager, the kube-scheduler and etcd). A restore needs both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Snapshot,
    StaticResources,
}

impl Role {
    pub const ALL: [Role; 2] = [Role::Snapshot, Role::StaticResources];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Snapshot => "snapshot",
            Role::StaticResources => "static_resources",
        }
    }

    /// The object's name under the backup's prefix (the file's own name, with its date, is recorded).
    pub fn object_name(self) -> &'static str {
        match self {
            Role::Snapshot => "snapshot.db",
            Role::StaticResources => "static_kuberesources.tar.gz",
        }
    }

    /// The environment variable that hands the Pod this file's upload URL.
    pub fn url_env(self) -> &'static str {
        match self {
            Role::Snapshot => "SNAPSHOT_URL",
            Role::StaticResources => "RESOURCES_URL",
        }
    }

    fn from_str(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// A file of a backup as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct File {
    pub role: &'static str,
    /// The name `cluster-backup.sh` gave it on the node.
    pub name: String,
    /// The object key in the bucket.
    pub object: String,
    pub size: u64,
    pub sha256: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("name {0:?} must be 1 to 63 letters, digits, '-', '_' or '.', starting with a letter or digit")]
    Name(String),
    #[error("object_prefix {0:?} must be a relative key prefix without '..' or empty segments")]
    Prefix(String),
    #[error("node {node}: {why}")]
    Node { node: String, why: String },
    #[error("no control-plane node is Ready (looked at: {0}); etcd cannot be backed up from a node that is down")]
    NoReadyNode(String),
    #[error("the cluster has no control-plane node (no Node labelled node-role.kubernetes.io/master or control-plane)")]
    NoControlPlane,
    #[error("the backup Pod said it succeeded but its result is unreadable ({0}); the objects are not trusted")]
    Result(String),
}

/// A backup name: it names a folder on the node, the objects' prefix and a label value.
pub fn check_name(name: &str) -> Result<(), PlanError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.contains("..");
    if ok {
        Ok(())
    } else {
        Err(PlanError::Name(name.to_string()))
    }
}

/// The prefix without surrounding slashes; refused when a segment is empty, `.` or `..`.
pub fn check_prefix(prefix: &str) -> Result<String, PlanError> {
    let p = prefix.trim_matches('/');
    if p.is_empty() || p.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return Err(PlanError::Prefix(prefix.to_string()));
    }
    Ok(p.to_string())
}

/// The object key of one file of backup `name`.
pub fn object_key(prefix: &str, name: &str, role: Role) -> String {
    format!("{prefix}/{name}/{}", role.object_name())
}

fn is_control_plane(node: &Value) -> bool {
    let labels = node.pointer("/metadata/labels");
    [
        "node-role.kubernetes.io/master",
        "node-role.kubernetes.io/control-plane",
    ]
    .iter()
    .any(|l| labels.and_then(|m| m.get(*l)).is_some())
}

fn is_ready(node: &Value) -> bool {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The control-plane node the backup runs on: `wanted` when it is one and Ready, else the first Ready
/// one by name (the docs: "any control plane node").
pub fn pick_node(nodes: &[Value], wanted: Option<&str>) -> Result<String, PlanError> {
    let mut cp: Vec<&Value> = nodes.iter().filter(|n| is_control_plane(n)).collect();
    cp.sort_by(|a, b| name_of(a).cmp(name_of(b)));
    if let Some(w) = wanted {
        let why = match (
            nodes.iter().find(|n| name_of(n) == w),
            cp.iter().find(|n| name_of(n) == w),
        ) {
            (None, _) => "no such Node".to_string(),
            (Some(_), None) => "not a control-plane node: etcd runs only on those".to_string(),
            (_, Some(n)) if !is_ready(n) => "not Ready".to_string(),
            _ => return Ok(w.to_string()),
        };
        return Err(PlanError::Node {
            node: w.to_string(),
            why,
        });
    }
    if cp.is_empty() {
        return Err(PlanError::NoControlPlane);
    }
    cp.iter()
        .find(|n| is_ready(n))
        .map(|n| name_of(n).to_string())
        .ok_or_else(|| {
            PlanError::NoReadyNode(cp.iter().map(|n| name_of(n)).collect::<Vec<_>>().join(", "))
        })
}

/// The image of the `etcd` container of a node's etcd static pod (`openshift-etcd/etcd-<node>`): it is
/// on the node already (no pull, a disconnected cluster included) and has `bash` and `chroot`.
pub fn etcd_image(pod: &Value) -> Option<String> {
    pod.pointer("/spec/containers")?
        .as_array()?
        .iter()
        .find(|c| c.get("name").and_then(Value::as_str) == Some("etcd"))?
        .get("image")?
        .as_str()
        .map(str::to_string)
}

/// Runs on the node's own root (chrooted into it, as the docs' `chroot /host`): the backup, then each
/// file's size and SHA-256 and its upload to its presigned URL, then the folder removed unless kept.
/// Its one line of standard output, the files as JSON, becomes the Pod's termination message; the
/// rest goes to standard error, the Pod's log.
pub const NODE_SCRIPT: &str = r#"set -euo pipefail
dir="$BACKUP_DIR"
if [ -e "$dir" ]; then
  echo "$dir already exists on this node: a backup of this name was taken or started before" >&2
  exit 3
fi
cleanup() { [ "${KEEP_ON_NODE:-false}" = true ] || rm -rf "$dir"; }
trap cleanup EXIT
cluster-backup.sh "$dir" >&2
out=""
for role in snapshot static_resources; do
  case "$role" in
    snapshot) f=$(ls "$dir"/snapshot_*.db); url="$SNAPSHOT_URL" ;;
    static_resources) f=$(ls "$dir"/static_kuberesources_*.tar.gz); url="$RESOURCES_URL" ;;
  esac
  size=$(stat -c %s "$f")
  sum=$(sha256sum "$f" | cut -d' ' -f1)
  curl --silent --show-error --fail --retry 3 -H 'Expect:' --upload-file "$f" "$url" >&2
  echo "uploaded $(basename "$f") ($size bytes, sha256 $sum)" >&2
  out="$out${out:+,}{\"role\":\"$role\",\"name\":\"$(basename "$f")\",\"size\":$size,\"sha256\":\"$sum\"}"
done
echo "{\"files\":[$out]}"
"#;

/// The container's own command: the node script in the host's root, its result kept as the
/// termination message (the container's `/dev/termination-log`, which the host's root does not have).
const CONTAINER_SCRIPT: &str = r#"set -euo pipefail
result=$(chroot /host /bin/bash -c "$1")
printf '%s' "$result" > /dev/termination-log
"#;

/// What the backup Pod needs: where it runs, with what, and what it is called.
pub struct PodPlan<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub node: &'a str,
    pub image: &'a str,
    pub backup_dir: &'a str,
    pub keep_on_node: bool,
    pub deadline_secs: u64,
}

fn labels(name: &str) -> Value {
    json!({MANAGED_BY.0: MANAGED_BY.1, BACKUP_LABEL: name})
}

/// The Secret holding the upload URLs (credentials while they last: kept out of the Pod's spec).
pub fn url_secret(p: &PodPlan, urls: &[(Role, String)]) -> Value {
    let data: serde_json::Map<String, Value> = urls
        .iter()
        .map(|(r, u)| (r.url_env().to_string(), Value::String(u.clone())))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"generateName": "proxshift-etcd-backup-", "namespace": p.namespace, "labels": labels(p.name)},
        "type": "Opaque",
        "stringData": data,
    })
}

/// The backup Pod, shaped as `oc debug node/<node>` shapes its node debug Pod (openshift/oc
/// `pkg/cli/debug`: the node by name, host network/PID/IPC, privileged as root, the host's `/` at
/// `/host`, never restarted), tolerating every taint as a static pod does.
pub fn pod(p: &PodPlan, secret: &str) -> Value {
    let dir = format!("{}/{}", p.backup_dir.trim_end_matches('/'), p.name);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "proxshift-etcd-backup-", "namespace": p.namespace, "labels": labels(p.name)},
        "spec": {
            "nodeName": p.node,
            "hostNetwork": true, "hostPID": true, "hostIPC": true,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": p.deadline_secs,
            "tolerations": [{"operator": "Exists"}],
            "volumes": [{"name": "host", "hostPath": {"path": "/", "type": "Directory"}}],
            "containers": [{
                "name": CONTAINER,
                "image": p.image,
                "command": ["/bin/bash", "-c", CONTAINER_SCRIPT, "proxshift-etcd-backup", NODE_SCRIPT],
                "env": [
                    {"name": "BACKUP_DIR", "value": dir},
                    {"name": "KEEP_ON_NODE", "value": p.keep_on_node.to_string()},
                    {"name": "PATH", "value": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                ],
                "envFrom": [{"secretRef": {"name": secret}}],
                "securityContext": {"privileged": true, "runAsUser": 0},
                "volumeMounts": [{"name": "host", "mountPath": "/host"}],
                "terminationMessagePolicy": "FallbackToLogsOnError",
            }],
        },
    })
}

/// Where the backup Pod stands.
#[derive(Debug, PartialEq, Eq)]
pub enum PodState {
    Running(String),
    Succeeded(String),
    Failed(String),
}

/// The Pod's phase; when it ended, the container's termination message (the result, or on failure
/// what it said) and exit code.
pub fn pod_state(pod: &Value) -> PodState {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    let terminated = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("name").and_then(Value::as_str) == Some(CONTAINER))
        })
        .and_then(|c| c.pointer("/state/terminated"));
    let field = |k: &str| {
        terminated
            .and_then(|t| t.get(k))
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
            .unwrap_or_default()
    };
    match phase {
        "Succeeded" => PodState::Succeeded(field("message")),
        "Failed" => {
            let reason = pod
                .pointer("/status/reason")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| field("reason"));
            let mut s = format!("exit code {}", field("exitCode"));
            if s == "exit code " {
                s = "no exit code".into();
            }
            if !reason.is_empty() {
                s.push_str(&format!(", {reason}"));
            }
            let msg = field("message");
            let msg = if msg.is_empty() {
                pod.pointer("/status/message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            } else {
                msg
            };
            if !msg.is_empty() {
                s.push_str(&format!(": {}", msg.trim()));
            }
            PodState::Failed(s)
        }
        other => PodState::Running(format!("phase {other}")),
    }
}

/// The files of the Pod's result, each checked: both roles, once each, a file name as
/// `cluster-backup.sh` makes it, a size and a 64-digit SHA-256.
pub fn parse_result(message: &str, prefix: &str, name: &str) -> Result<Vec<File>, PlanError> {
    let bad = |why: &str| PlanError::Result(why.to_string());
    let v: Value = serde_json::from_str(message.trim()).map_err(|_| bad("not JSON"))?;
    let items = v
        .get("files")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no files"))?;
    let mut files = Vec::new();
    for it in items {
        let role = it
            .get("role")
            .and_then(Value::as_str)
            .and_then(Role::from_str)
            .ok_or_else(|| bad("a file of unknown role"))?;
        let fname = it.get("name").and_then(Value::as_str).unwrap_or("");
        let pattern_ok = match role {
            Role::Snapshot => fname.starts_with("snapshot_") && fname.ends_with(".db"),
            Role::StaticResources => {
                fname.starts_with("static_kuberesources_") && fname.ends_with(".tar.gz")
            }
        };
        let sha = it.get("sha256").and_then(Value::as_str).unwrap_or("");
        let size = it.get("size").and_then(Value::as_u64);
        if !pattern_ok || sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(&format!("file {fname:?} of role {}", role.as_str())));
        }
        if files.iter().any(|f: &File| f.role == role.as_str()) {
            return Err(bad(&format!("role {} twice", role.as_str())));
        }
        files.push(File {
            role: role.as_str(),
            name: fname.to_string(),
            object: object_key(prefix, name, role),
            size: size.ok_or_else(|| bad("a file without its size"))?,
            sha256: sha.to_ascii_lowercase(),
        });
    }
    if files.len() != Role::ALL.len() {
        return Err(bad("the snapshot or the static resources are missing"));
    }
    Ok(files)
}

/// One earlier backup as the cluster's record lists it (`name`, `files[].object`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub name: String,
    pub objects: Vec<String>,
}

/// The recorded backups, oldest first (the record appends), each with its objects; entries without a
/// name are refused by name of the option.
pub fn recorded(backups: &[Value]) -> Result<Vec<Recorded>, String> {
    backups
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let name = b
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty());
            let name = name.ok_or_else(|| format!("backups[{i}] has no name"))?;
            let objects = b
                .get("files")
                .and_then(Value::as_array)
                .map(|fs| {
                    fs.iter()
                        .filter_map(|f| f.get("object").and_then(Value::as_str))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            Ok(Recorded {
                name: name.to_string(),
                objects,
            })
        })
        .collect()
}

/// The recorded backups retention removes once `new` is taken: all but the `keep` newest, counting
/// `new` (`keep` 0 keeps everything). Only backups whose objects all lie under `prefix` count and are
/// removed: one recorded in another store or prefix (the store was changed) is left to whoever moved it.
pub fn to_prune(recorded: &[Recorded], new: &str, keep: usize, prefix: &str) -> Vec<Recorded> {
    if keep == 0 {
        return Vec::new();
    }
    let under = |r: &&Recorded| {
        !r.objects.is_empty()
            && r.objects
                .iter()
                .all(|o| o.starts_with(&format!("{prefix}/")))
    };
    let older: Vec<&Recorded> = recorded
        .iter()
        .filter(|r| r.name != new)
        .filter(under)
        .collect();
    let drop = (older.len() + 1).saturating_sub(keep);
    older.into_iter().take(drop).cloned().collect()
}

#[cfg(test)]
mod tests;
