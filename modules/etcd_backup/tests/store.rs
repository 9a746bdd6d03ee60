//! `state=absent` against a real S3 server (s3s-fs checks every signature): a recorded backup's
//! objects are removed from the store, and nothing else — not another cluster's backup of the same
//! name in the same bucket, not an object the record names outside `object_prefix`. No cluster is
//! needed: the backups of a deprovisioned cluster can still be removed.

use std::time::{Duration, SystemTime};

use module_testkit::TestModule;
use s3_client::testenv::{S3Server, ACCESS_KEY, BUCKET, SECRET_KEY};
use s3_client::Store;
use serde_json::{json, Value};

/// Puts `key` the way the backup Pod does: a plain PUT to a presigned URL.
fn put(st: &Store, key: &str, body: &[u8]) {
    let url = st.presign_put(key, Duration::from_secs(60), SystemTime::now());
    let status = proxshift_http::reqwest::blocking::Client::new()
        .put(url)
        .body(body.to_vec())
        .send()
        .unwrap()
        .status();
    assert!(status.is_success(), "PUT {key}: {status}");
}

fn record(name: &str, objects: &[&str]) -> Value {
    let files: Vec<Value> = objects.iter().map(|o| json!({"object": o})).collect();
    json!({"name": name, "files": files})
}

fn module(s: &S3Server, args: Value) -> Value {
    let mut a = json!({
        "state": "absent",
        "bucket": BUCKET,
        "endpoint_url": s.endpoint,
        "access_key": ACCESS_KEY,
        "secret_key": SECRET_KEY,
    });
    for (k, v) in args.as_object().unwrap() {
        a[k] = v.clone();
    }
    TestModule::new(
        "etcd_backup",
        etcd_backup::argument_spec(),
        etcd_backup::run,
    )
    .hiding(SECRET_KEY)
    .run(&a)
    .0
}

#[test]
fn absent_removes_one_recorded_backup_and_nothing_else() {
    let s = S3Server::start("etcd-absent");
    let st = Store::new(&s.options()).unwrap();
    let c1 = [
        "proxshift/etcd/c1/etcd-a/snapshot.db",
        "proxshift/etcd/c1/etcd-a/static_kuberesources.tar.gz",
    ];
    let c2 = "proxshift/etcd/c2/etcd-a/snapshot.db";
    let elsewhere = "other-team/etcd-a/snapshot.db";
    for key in c1.iter().chain([&c2, &elsewhere]) {
        put(&st, key, b"etcd");
    }
    // c1's record names its two objects and, wrongly, one outside its prefix.
    let backups = json!([
        record("etcd-a", &[c1[0], c1[1], elsewhere]),
        record("etcd-b", &[])
    ]);
    let args = |more: Value| {
        let mut a =
            json!({"name": "etcd-a", "object_prefix": "proxshift/etcd/c1", "backups": backups});
        for (k, v) in more.as_object().unwrap() {
            a[k] = v.clone();
        }
        a
    };

    let r = module(
        &s,
        args(json!({"_ansible_check_mode": true, "_ansible_diff": true})),
    );
    assert_eq!(r["changed"], json!(true), "{r:#}");
    assert_eq!(r["removed"], json!(c1), "{r:#}");
    assert!(r["msg"].as_str().unwrap().contains("would remove"), "{r:#}");
    assert!(r["diff"].is_object(), "{r:#}");
    assert_eq!(
        st.head_object(c1[0]).unwrap(),
        Some(4),
        "check mode removes nothing"
    );

    let r = module(&s, args(json!({})));
    assert_eq!(r["changed"], json!(true), "{r:#}");
    assert_eq!(r["removed"], json!(c1));
    for key in c1 {
        assert_eq!(st.head_object(key).unwrap(), None, "{key}");
    }
    assert_eq!(
        st.head_object(c2).unwrap(),
        Some(4),
        "c2's backup of the same name stays"
    );
    assert_eq!(
        st.head_object(elsewhere).unwrap(),
        Some(4),
        "outside object_prefix"
    );

    let again = module(&s, args(json!({})));
    assert_eq!(again["changed"], json!(false), "{again:#}");
    assert!(
        again["msg"]
            .as_str()
            .unwrap()
            .contains("has no object left"),
        "{again:#}"
    );
    let unknown = module(&s, args(json!({"name": "etcd-zzz"})));
    assert_eq!(unknown["changed"], json!(false), "{unknown:#}");
    assert!(
        unknown["msg"]
            .as_str()
            .unwrap()
            .contains("no recorded backup named etcd-zzz"),
        "{unknown:#}"
    );
}

#[test]
fn present_still_needs_a_cluster() {
    let s = S3Server::start("etcd-needs-cluster");
    let r = module(&s, json!({"state": "present", "name": "etcd-a"}));
    assert_eq!(r["failed"], json!(true), "{r:#}");
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.contains("kubeconfig") && msg.contains("api_url"),
        "{msg}"
    );
}
