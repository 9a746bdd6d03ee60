//! A blocking client for S3-compatible object stores: the off-cluster home of etcd backups.
//!
//! - [`sigv4`] — pure AWS Signature Version 4 for S3: the canonical request, the signing key, a
//!   request's `Authorization` header and a presigned URL (AWS "Authenticating Requests (AWS Signature
//!   Version 4)", header and query-string forms). Checked against AWS's published examples.
//! - [`Store`] — one bucket at one endpoint, path-style (`https://host/bucket/key`: Ceph RGW, MinIO and
//!   AWS all take it): `head_bucket`, `head_object`, `object_sha256` (streams the object and hashes it),
//!   `delete_object`, `presign_put` (a URL another machine uploads to without the credentials). Transient
//!   failures are retried with [`proxshift_http::Backoff`]; errors keep their cause ([`S3Error`]).

pub mod sigv4;
mod store;
#[cfg(feature = "test-support")]
pub mod testenv;

pub use sigv4::Credentials;
pub use store::{S3Error, Store, StoreOptions};
