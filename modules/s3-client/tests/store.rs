//! The client against a real S3 server (s3s-fs checks every signature).

use std::time::{Duration, SystemTime};

use proxshift_http::Backoff;
use s3_client::sigv4::sha256_hex;
use s3_client::testenv::{S3Server, BUCKET};
use s3_client::{S3Error, Store};

fn store(s: &S3Server) -> Store {
    let mut st = Store::new(&s.options()).unwrap();
    st.set_backoff(Backoff::none());
    st
}

/// An upload as the backup pod makes it (`curl -T FILE URL`): a plain PUT to the presigned URL.
fn put(url: &str, body: Vec<u8>) -> u16 {
    proxshift_http::reqwest::blocking::Client::new()
        .put(url)
        .body(body)
        .send()
        .unwrap()
        .status()
        .as_u16()
}

#[test]
fn a_presigned_upload_lands_and_reads_back_with_its_checksum() {
    let s = S3Server::start("roundtrip");
    let st = store(&s);
    st.head_bucket().unwrap();
    let key = "clusters/lab/etcd-20261207/snapshot.db";
    assert_eq!(st.head_object(key).unwrap(), None);
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let url = st.presign_put(key, Duration::from_secs(300), SystemTime::now());
    assert_eq!(put(&url, body.clone()), 200);
    assert_eq!(std::fs::read(s.file(key)).unwrap(), body);
    assert_eq!(st.head_object(key).unwrap(), Some(body.len() as u64));
    assert_eq!(
        st.object_sha256(key).unwrap(),
        Some((body.len() as u64, sha256_hex(&body)))
    );
    assert!(st.delete_object(key).unwrap());
    assert!(!st.delete_object(key).unwrap());
    assert_eq!(st.object_sha256(key).unwrap(), None);
}

#[test]
fn a_presigned_url_writes_only_its_own_key_and_only_while_it_lasts() {
    let s = S3Server::start("presign");
    let st = store(&s);
    let url = st.presign_put("a/snapshot.db", Duration::from_secs(300), SystemTime::now());
    assert_eq!(
        put(
            &url.replace("a/snapshot.db", "b/snapshot.db"),
            b"x".to_vec()
        ),
        403
    );
    let old = SystemTime::now() - Duration::from_secs(3600);
    let expired = st.presign_put("a/snapshot.db", Duration::from_secs(60), old);
    assert_eq!(put(&expired, b"x".to_vec()), 403);
    assert_eq!(st.head_object("a/snapshot.db").unwrap(), None);
    assert_eq!(st.head_object("b/snapshot.db").unwrap(), None);
}

#[test]
fn a_wrong_secret_and_a_missing_bucket_say_so() {
    let s = S3Server::start("refusals");
    let mut o = s.options();
    o.credentials.secret_key = "wrong".into();
    let e = Store::new(&o).unwrap().head_object("x").unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    let mut o = s.options();
    o.bucket = "no-such-bucket".into();
    let e = Store::new(&o).unwrap().head_bucket().unwrap_err();
    assert!(
        matches!(&e, S3Error::Status { status: 404, code, .. } if code == "NoSuchBucket"),
        "{e}"
    );
    assert!(e.to_string().contains("s3://no-such-bucket"), "{e}");
    assert_ne!(BUCKET, "no-such-bucket");
}

#[test]
fn an_unreachable_store_is_a_transport_error_not_a_certificate_one() {
    let mut o = S3Server::start("gone").options();
    o.endpoint = "http://127.0.0.1:9".into();
    let mut st = Store::new(&o).unwrap();
    st.set_backoff(Backoff::none());
    let e = st.head_bucket().unwrap_err();
    assert!(
        matches!(e, S3Error::Transport { .. }) && !e.is_certificate(),
        "{e}"
    );
}
