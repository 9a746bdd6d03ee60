//! `state=lease_acquire|lease_renew|lease_release` against a real OpenBao server: the built binary run
//! the way ansible-core runs it. Many runs racing for one lease: exactly one holds it.

use std::path::Path;
use std::sync::{Arc, Barrier};

use serde_json::{json, Map, Value};
use vault_client::testserver::BaoServer;
use vault_client::KvVersion;

const PATH: &str = "openshift/clusters/demo/lease";

fn module(args: Value) -> Value {
    module_testkit::run_binary(Path::new(env!("CARGO_BIN_EXE_hashicorp_vault")), &args, &[])
}

fn lease_args(bao: &BaoServer, state: &str, run_id: &str, more: Value) -> Value {
    let mut m = json!({
        "url": bao.addr, "token": bao.root_token, "retries": 0, "state": state, "path": PATH,
        "holder": {"run_id": run_id, "host": format!("host-{run_id}"), "job_id": ""},
    })
    .as_object()
    .unwrap()
    .clone();
    m.extend(more.as_object().unwrap().clone());
    Value::Object(m)
}

fn stored(bao: &BaoServer) -> (Option<Map<String, Value>>, Option<u64>) {
    let s = bao
        .root()
        .kv_read(KvVersion::V2, "secret", PATH, None)
        .unwrap();
    (
        s.as_ref().and_then(|s| s.data.clone()),
        s.and_then(|s| s.version),
    )
}

#[test]
fn ten_runs_racing_for_one_lease_leave_exactly_one_holder() {
    let bao = Arc::new(BaoServer::dev());
    let start = Arc::new(Barrier::new(10));
    let runs: Vec<_> = (0..10)
        .map(|i| {
            let (bao, start) = (bao.clone(), start.clone());
            std::thread::spawn(move || {
                let args = lease_args(&bao, "lease_acquire", &format!("run{i}"), json!({}));
                start.wait();
                module(args)
            })
        })
        .collect();
    let results: Vec<Value> = runs.into_iter().map(|t| t.join().unwrap()).collect();
    let winners: Vec<&Value> = results
        .iter()
        .filter(|r| r["failed"] != json!(true))
        .collect();
    assert_eq!(winners.len(), 1, "{results:#?}");
    let holder = winners[0]["lease"]["holder"]["run_id"].as_str().unwrap();
    let (data, _) = stored(&bao);
    assert_eq!(data.unwrap()["holder"]["run_id"], json!(holder));
    for r in results.iter().filter(|r| r["failed"] == json!(true)) {
        let msg = r["msg"].as_str().unwrap();
        assert!(
            msg.contains(&format!("held by run {holder} on host host-{holder}"))
                && msg.contains("taken ")
                && msg.contains("wrote nothing"),
            "{msg}"
        );
    }
}

#[test]
fn renew_release_takeover_and_check_mode() {
    let bao = BaoServer::dev();
    let r = module(lease_args(
        &bao,
        "lease_acquire",
        "a",
        json!({"lease_phase": "preflight"}),
    ));
    assert_eq!(r["changed"], json!(true), "{r}");
    assert_eq!(r["lease"]["phase"], json!("preflight"));
    let (_, v1) = stored(&bao);

    // Check mode: another run is told it would be refused, and nothing is written.
    let r = module(lease_args(
        &bao,
        "lease_acquire",
        "b",
        json!({"_ansible_check_mode": true}),
    ));
    assert_eq!(
        (r["failed"].clone(), r["changed"].clone()),
        (Value::Null, json!(false)),
        "{r}"
    );
    assert!(
        r["warnings"][0].as_str().unwrap().contains("held by run a"),
        "{r}"
    );
    assert_eq!(stored(&bao).1, v1);

    // The holder renews with its phase; another run may neither renew nor release it.
    let r = module(lease_args(
        &bao,
        "lease_renew",
        "a",
        json!({"lease_phase": "vms"}),
    ));
    assert_eq!(r["lease"]["phase"], json!("vms"), "{r}");
    let r = module(lease_args(&bao, "lease_renew", "b", json!({})));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("no longer holds the lease"),
        "{r}"
    );
    let before = stored(&bao);
    let r = module(lease_args(&bao, "lease_release", "b", json!({})));
    assert_eq!(r["changed"], json!(false), "{r}");
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("not this run's to release"),
        "{r}"
    );
    assert_eq!(stored(&bao), before);

    // A run that died: its lease expires (ttl 1 s, written as it would be) and is taken over with a warning.
    let (mut data, _) = stored(&bao);
    let d = data.as_mut().unwrap();
    d.insert(
        "expires_at".into(),
        json!(d["renewed_at"].as_u64().unwrap() - 1),
    );
    bao.root()
        .kv_write(KvVersion::V2, "secret", PATH, d, None)
        .unwrap();
    let r = module(lease_args(&bao, "lease_acquire", "b", json!({})));
    assert_eq!(
        (r["changed"].clone(), r["taken_over"].clone()),
        (json!(true), json!(true)),
        "{r}"
    );
    assert_eq!(r["previous"]["holder"]["run_id"], json!("a"));
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("took over the expired lease"),
        "{r}"
    );
    // The dead run, back, has lost it.
    let r = module(lease_args(&bao, "lease_renew", "a", json!({})));
    assert_eq!(r["failed"], json!(true), "{r}");

    let r = module(lease_args(&bao, "lease_release", "b", json!({})));
    assert_eq!(r["changed"], json!(true), "{r}");
    let (data, _) = stored(&bao);
    let data = data.unwrap();
    assert!(!data.contains_key("holder") && data["last_holder"]["run_id"] == json!("b"));
    let r = module(lease_args(&bao, "lease_release", "b", json!({})));
    assert_eq!(r["changed"], json!(false), "{r}");
    // Free again: anyone takes it.
    let r = module(lease_args(&bao, "lease_acquire", "c", json!({})));
    assert_eq!(r["taken_over"], json!(false), "{r}");
}

#[test]
fn a_kv_v1_mount_is_refused_naming_it() {
    let bao = BaoServer::dev();
    let r = module(lease_args(
        &bao,
        "lease_acquire",
        "a",
        json!({"kv_version": 1}),
    ));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("a lease needs a KV v2 mount"),
        "{r}"
    );
}

#[test]
fn lease_wait_queues_behind_the_holder() {
    let bao = Arc::new(BaoServer::dev());
    let r = module(lease_args(&bao, "lease_acquire", "a", json!({})));
    assert_eq!(r["changed"], json!(true), "{r}");
    // A holder that does not let go: the wait runs out and says so.
    let r = module(lease_args(
        &bao,
        "lease_acquire",
        "b",
        json!({"lease_wait": 1}),
    ));
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.starts_with("waited ") && msg.contains("held by run a"),
        "{msg}"
    );
    // A holder that releases while the other waits: the waiting run gets it.
    let waiter = {
        let bao = bao.clone();
        std::thread::spawn(move || {
            module(lease_args(
                &bao,
                "lease_acquire",
                "b",
                json!({"lease_wait": 120}),
            ))
        })
    };
    // Let the waiter find it held at least once (an ordering, not a timing assertion).
    std::thread::sleep(std::time::Duration::from_secs(3));
    let r = module(lease_args(&bao, "lease_release", "a", json!({})));
    assert_eq!(r["changed"], json!(true), "{r}");
    let r = waiter.join().unwrap();
    assert_eq!(
        (r["changed"].clone(), r["lease"]["holder"]["run_id"].clone()),
        (json!(true), json!("b")),
        "{r}"
    );
}

/// Whether a process runs (a zombie, ended but not yet reaped, does not).
fn running(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().to_string()))
        .is_some_and(|r| !r.starts_with('Z'))
}

/// Poll `cond` (bounded: a minute); whether it came true.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..600 {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn expires_at(bao: &BaoServer) -> u64 {
    stored(bao).0.unwrap()["expires_at"].as_u64().unwrap()
}

/// A stand-in for the run the keeper serves: a process the test ends when it likes.
fn a_run() -> std::process::Child {
    std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap()
}

#[test]
fn the_keeper_holds_the_lease_past_its_ttl_while_the_run_lives_and_reports_a_loss() {
    let bao = BaoServer::dev();
    let dir = std::env::temp_dir().join(format!("lease-keeper-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lost = dir.join("a.lost");
    std::fs::write(&lost, "left by an earlier run").unwrap();
    let ttl = json!({"lease_ttl": 3});
    let r = module(lease_args(&bao, "lease_acquire", "a", ttl.clone()));
    assert_eq!(r["changed"], json!(true), "{r}");
    let mut run = a_run();
    let keep = json!({"lease_ttl": 3, "lease_watch_pid": run.id(), "lease_lost_file": lost});
    let r = module(lease_args(&bao, "lease_keep", "a", keep.clone()));
    assert_eq!(r["failed"], Value::Null, "{r}");
    assert_eq!(
        (r["watch_pid"].as_u64(), r["renew_every"].as_u64()),
        (Some(run.id().into()), Some(1))
    );
    assert!(
        !lost.exists(),
        "an earlier loss is cleared when the keeper starts"
    );
    let keeper = r["keeper_pid"].as_u64().unwrap();
    assert!(running(keeper));

    // Past the expiry the module's own renewal gave: a second run is still refused.
    let first = expires_at(&bao);
    assert!(eventually(|| now() > first + 1));
    let r = module(lease_args(&bao, "lease_acquire", "b", json!({})));
    assert_eq!(r["failed"], json!(true), "{r}");
    assert!(r["msg"].as_str().unwrap().contains("held by run a"), "{r}");
    assert!(expires_at(&bao) > first);

    // Another run holds it now (as after a Vault outage longer than the TTL): the keeper says so and ends.
    let (data, _) = stored(&bao);
    let mut theirs = data.unwrap();
    theirs.insert("holder".into(), json!({"run_id": "c", "host": "ctl3"}));
    theirs.insert("expires_at".into(), json!(now() + 600));
    bao.root()
        .kv_write(KvVersion::V2, "secret", PATH, &theirs, None)
        .unwrap();
    assert!(eventually(|| lost.exists()), "no loss reported");
    let why = std::fs::read_to_string(&lost).unwrap();
    assert!(
        why.contains("no longer holds the lease") && why.contains("held by run c on host ctl3"),
        "{why}"
    );
    assert!(eventually(|| !running(keeper)));
    let r = module(lease_args(&bao, "lease_keep", "a", keep.clone()));
    assert!(r["msg"].as_str().unwrap().contains("held by run c"), "{r}");
    run.kill().unwrap();
    run.wait().unwrap();

    // The run dies: its keeper ends with it, and the lease expires as a killed run's lease does.
    module(lease_args(&bao, "lease_release", "c", json!({})));
    module(lease_args(&bao, "lease_acquire", "d", ttl.clone()));
    let mut run = a_run();
    let keep =
        json!({"lease_ttl": 3, "lease_watch_pid": run.id(), "lease_lost_file": dir.join("d.lost")});
    let keeper = module(lease_args(&bao, "lease_keep", "d", keep))["keeper_pid"]
        .as_u64()
        .unwrap();
    run.kill().unwrap();
    run.wait().unwrap();
    assert!(
        eventually(|| !running(keeper)),
        "the keeper outlived its run"
    );
    let last = expires_at(&bao);
    assert!(eventually(|| now() > last));
    let r = module(lease_args(&bao, "lease_acquire", "e", json!({})));
    assert_eq!(r["taken_over"], json!(true), "{r}");
    assert!(!dir.join("d.lost").exists());

    // The run releases its lease: the keeper ends, reporting no loss.
    let mut run = a_run();
    let keep =
        json!({"lease_ttl": 3, "lease_watch_pid": run.id(), "lease_lost_file": dir.join("e.lost")});
    let keeper = module(lease_args(&bao, "lease_keep", "e", keep))["keeper_pid"]
        .as_u64()
        .unwrap();
    module(lease_args(&bao, "lease_release", "e", json!({})));
    assert!(
        eventually(|| !running(keeper)),
        "the keeper outlived the lease"
    );
    assert!(!dir.join("e.lost").exists());
    run.kill().unwrap();
    run.wait().unwrap();

    // Without a process to follow it starts nothing.
    let r = module(lease_args(&bao, "lease_acquire", "f", json!({})));
    assert_eq!(r["changed"], json!(true), "{r}");
    let r = module(lease_args(&bao, "lease_keep", "f", json!({})));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("no ansible-playbook process"),
        "{r}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_release_with_lease_break_frees_only_the_dead_runs_lease() {
    let bao = BaoServer::dev();
    let r = module(lease_args(&bao, "lease_acquire", "dead", json!({})));
    assert_eq!(r["changed"], json!(true), "{r}");
    // Naming another run leaves the lease alone, with no warning.
    let before = stored(&bao);
    let r = module(lease_args(
        &bao,
        "lease_release",
        "b",
        json!({"lease_break": "other"}),
    ));
    assert_eq!(
        (r["changed"].clone(), r["warnings"].clone()),
        (json!(false), Value::Null),
        "{r}"
    );
    assert!(
        r["msg"].as_str().unwrap().contains("not held by run other"),
        "{r}"
    );
    assert_eq!(stored(&bao), before);
    // Naming the dead holder frees it at once, saying whose it was.
    let r = module(lease_args(
        &bao,
        "lease_release",
        "b",
        json!({"lease_break": "dead"}),
    ));
    assert_eq!(r["changed"], json!(true), "{r}");
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("of run dead on host host-dead"),
        "{r}"
    );
    let data = stored(&bao).0.unwrap();
    assert!(!data.contains_key("holder"), "{data:?}");
    assert_eq!(
        (
            data["last_holder"]["run_id"].clone(),
            data["broken_by"]["run_id"].clone()
        ),
        (json!("dead"), json!("b"))
    );
    let r = module(lease_args(&bao, "lease_acquire", "c", json!({})));
    assert_eq!(
        (r["changed"].clone(), r["taken_over"].clone()),
        (json!(true), json!(false)),
        "{r}"
    );
}
