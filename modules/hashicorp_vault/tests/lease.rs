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
