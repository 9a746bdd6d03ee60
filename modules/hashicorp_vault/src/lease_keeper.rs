//! `state=lease_keep`: keep the run's lease renewed for as long as the run lives, whatever it waits for
//! (an install of an hour and a half, an upgrade, a node join) — the lease never expires under a live run.
//!
//! The module renews the lease once (it fails when the run no longer holds it), then starts a keeper: this
//! binary again (`/proc/self/exe --lease-keeper`, its options on stdin, never in a file), detached from the
//! task. The keeper renews every third of the TTL (`lease::renew_every`) and ends
//! - when the process it serves is gone (`lease_watch_pid`, by default the `ansible-playbook` process the
//!   module runs under; its start time is compared too, so a reused pid is not mistaken for the run): a
//!   killed run's lease expires as before;
//! - when the run released the lease (the end of the run);
//! - when the run lost the lease (another run holds it), or could not renew it before it expired: it then
//!   writes why to `lease_lost_file`, which the playbooks check at every phase and while they wait, and the
//!   run stops there — as a Kubernetes controller stops working when its leader election lease is lost
//!   (client-go `tools/leaderelection`, `OnStoppedLeading`).

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ansible_module::{Failure, Module, Outcome};
use serde_json::{json, Value};
use vault_client::module_options::KvVersions;
use vault_client::Vault;

use crate::lease::{self, Holder};
use crate::lease_state::{self, KeepStep};
use crate::Options;

/// The argument that makes the module binary a keeper (options as JSON on stdin).
pub const KEEPER_FLAG: &str = "--lease-keeper";

/// A process's parent and start time (clock ticks after boot) from `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Pure: `/proc/PID/stat` after the command name (which may hold spaces and parentheses) is `state ppid
/// … starttime` — fields 3, 4 and 22 of proc(5).
pub fn parse_stat(text: &str) -> Option<(u32, u64)> {
    let rest: Vec<&str> = text
        .get(text.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    Some((rest.get(1)?.parse().ok()?, rest.get(19)?.parse().ok()?))
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// This process's parents, nearest first, with their command lines.
fn ancestors() -> Vec<(u32, Vec<String>)> {
    let mut chain = Vec::new();
    let mut pid = std::process::id();
    while let Some((ppid, _)) = stat(pid) {
        if ppid <= 1 || chain.len() > 64 {
            break;
        }
        chain.push((ppid, cmdline(ppid)));
        pid = ppid;
    }
    chain
}

/// Pure: the `ansible-playbook` process a module runs under, from its parents (nearest first). The
/// nearest one is the worker ansible-core forked for the task (same command line), which ends with the
/// task: the run is the farthest of that unbroken line of identical command lines.
pub fn playbook_process(chain: &[(u32, Vec<String>)]) -> Option<u32> {
    let is_playbook = |argv: &[String]| {
        argv.iter().take(2).any(|a| {
            Path::new(a)
                .file_name()
                .is_some_and(|f| f == "ansible-playbook")
        })
    };
    let first = chain.iter().position(|(_, argv)| is_playbook(argv))?;
    let mut top = &chain[first];
    for p in &chain[first + 1..] {
        if p.1 != top.1 {
            break;
        }
        top = p;
    }
    Some(top.0)
}

fn default_lost_file(run_id: &str) -> PathBuf {
    let safe: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    std::env::temp_dir().join(format!("proxshift-lease-{safe}.lost"))
}

fn holder(o: &Options) -> Result<Holder, Failure> {
    o.holder
        .clone()
        .ok_or_else(|| Failure::new("state=lease_keep needs holder"))
}

/// The module's side: renew once, start the keeper, say what it watches and where a loss is written.
pub(crate) fn start(
    m: &mut Module,
    vault: &Vault,
    kv: &mut KvVersions,
    o: &Options,
) -> Result<Outcome, Failure> {
    let me = holder(o)?;
    let where_ = format!(
        "{}/{}",
        o.engine_mount_point,
        vault_client::clean_path(o.path.as_deref().unwrap_or_default())
    );
    if m.check_mode {
        return Ok(Outcome::new(false).msg(format!(
            "would keep the lease {where_} renewed while the run lives (check mode)"
        )));
    }
    let watch = match o.lease_watch_pid {
        Some(p) if p < 1 || p > i64::from(u32::MAX) => {
            return Err("lease_watch_pid must be a process id (1 or more)".into())
        }
        Some(p) => p as u32,
        None => playbook_process(&ancestors()).ok_or_else(|| {
            Failure::new(
                "state=lease_keep found no ansible-playbook process among this module's parent processes \
                 (the keeper runs beside the run it serves, connection: local); set lease_watch_pid to the \
                 process whose life the lease follows",
            )
        })?,
    };
    if stat(watch).is_none() {
        return Err(Failure::new(format!(
            "lease_watch_pid: no process {watch} is running"
        )));
    }
    let renewed = lease_state::once(m, vault, kv, o, "lease_renew")?.map_err(Failure::new)?;
    let lost_file = o
        .lease_lost_file
        .as_deref()
        .map(PathBuf::from)
        .unwrap_or_else(|| default_lost_file(&me.run_id));
    match std::fs::remove_file(&lost_file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(Failure::new(format!(
                "lease_lost_file {}: cannot remove an earlier one: {e}",
                lost_file.display()
            )))
        }
        _ => {}
    }
    let mut params = m.params.clone();
    params.insert("lease_watch_pid".into(), json!(watch));
    params.insert(
        "lease_lost_file".into(),
        json!(lost_file.display().to_string()),
    );
    params.insert("_ansible_module_name".into(), json!(m.module_name));
    let pid = spawn(&Value::Object(params))?;
    let every = lease::renew_every(o.lease_ttl.max(1) as u64);
    Ok(renewed
        .msg(format!(
            "the lease {where_} is renewed every {every}s while process {watch} (the run) lives"
        ))
        .with("keeper_pid", pid)
        .with("watch_pid", watch)
        .with("renew_every", every)
        .with("lost_file", lost_file.display().to_string()))
}

/// This binary again as the keeper, detached from the task: no inherited output pipe (ansible-core reads
/// the module's output to its end), its options on stdin.
fn spawn(params: &Value) -> Result<u32, Failure> {
    let started = || -> std::io::Result<u32> {
        let mut child = Command::new("/proc/self/exe")
            .arg0("hashicorp_vault")
            .arg(KEEPER_FLAG)
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let pid = child.id();
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(params.to_string().as_bytes())?;
        }
        Ok(pid)
    };
    started().map_err(|e| Failure::new(format!("starting the lease keeper: {e}")))
}

/// Sleep `d` in short steps; `false` as soon as the run is gone.
fn sleep_while(d: Duration, alive: &dyn Fn() -> bool) -> bool {
    let until = Instant::now() + d;
    loop {
        if !alive() {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(500)));
    }
}

fn write_lost(path: &Path, why: &str) {
    let tmp = path.with_extension("lost.tmp");
    if std::fs::write(&tmp, why).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

/// The keeper's side (`--lease-keeper`): renew until the run ends, releases or loses the lease.
pub fn serve(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    let me = holder(&o)?;
    let watch = o
        .lease_watch_pid
        .filter(|p| *p > 0)
        .ok_or("the keeper needs lease_watch_pid")? as u32;
    let lost_file = PathBuf::from(
        o.lease_lost_file
            .clone()
            .ok_or("the keeper needs lease_lost_file")?,
    );
    let Some((_, born)) = stat(watch) else {
        return Ok(Outcome::new(false).msg("the run had ended"));
    };
    let alive = || stat(watch).is_some_and(|(_, s)| s == born);
    let mount = o.engine_mount_point.clone();
    let path = o.path.clone().unwrap_or_default();
    let ttl = o.lease_ttl.max(1) as u64;
    let every = Duration::from_secs(lease::renew_every(ttl));
    // The module renewed the lease just before it started this keeper.
    let mut expires_at = lease_state::now().saturating_add(ttl);
    let mut pause = every;
    let mut vault: Option<Vault> = None;
    loop {
        if !sleep_while(pause, &alive) {
            return Ok(Outcome::new(false).msg("the run ended"));
        }
        let step = match &vault {
            Some(v) => {
                lease_state::keep_once(v, &mount, &path, &me, ttl).map_err(|e| e.to_string())
            }
            None => o.conn.connect(m).map_err(|f| f.msg).and_then(|v| {
                let step =
                    lease_state::keep_once(&v, &mount, &path, &me, ttl).map_err(|e| e.to_string());
                vault = Some(v);
                step
            }),
        };
        match step {
            Ok(KeepStep::Renewed(at)) => {
                expires_at = at;
                pause = every;
            }
            Ok(KeepStep::Released) => return Ok(Outcome::new(false).msg("the run released it")),
            Ok(KeepStep::Lost(why)) => {
                write_lost(&lost_file, &why);
                return Ok(Outcome::new(false).msg(why));
            }
            Err(e) if lease_state::now() >= expires_at => {
                let why = format!(
                    "this run ({}) could not renew the lease {mount}/{} before it expired ({e}); another \
                     run may hold the cluster now, so this run stops before writing anything more",
                    me.describe(),
                    vault_client::clean_path(&path)
                );
                write_lost(&lost_file, &why);
                return Ok(Outcome::new(false).msg(why));
            }
            Err(_) => {
                vault = None;
                pause = every.min(Duration::from_secs(5));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_run_is_the_farthest_of_the_forked_playbook_processes() {
        let playbook = argv(&[
            "/usr/bin/python3",
            "/venv/bin/ansible-playbook",
            "-i",
            "inv",
            "site.yaml",
        ]);
        let chain = vec![
            (
                40,
                argv(&[
                    "/bin/sh",
                    "-c",
                    "/root/.ansible/tmp/ansible-tmp-1/proxshift_hashi_vault args",
                ]),
            ),
            (30, playbook.clone()),
            (20, playbook.clone()),
            (
                10,
                argv(&["ansible-runner", "run", "/runner", "-p", "site.yaml"]),
            ),
        ];
        assert_eq!(playbook_process(&chain), Some(20));
        let direct = vec![
            (30, argv(&["ansible-playbook", "site.yaml"])),
            (9, argv(&["bash"])),
        ];
        assert_eq!(playbook_process(&direct), Some(30));
        assert_eq!(playbook_process(&[(5, argv(&["cargo", "test"]))]), None);
    }

    #[test]
    fn stat_reads_the_parent_and_start_time_past_an_odd_command_name() {
        let line = "4242 (odd) name)) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_stat(line), Some((17, 987654)));
        assert_eq!(parse_stat("garbage"), None);
        let own = stat(std::process::id()).expect("this process's own stat");
        assert!(own.0 > 0);
    }
}
