//! One bucket of an S3-compatible store, addressed path-style, every request signed with
//! [`crate::sigv4`].

use std::io::Read;
use std::time::{Duration, SystemTime};

use proxshift_http::reqwest::blocking::{Client, Response};
use proxshift_http::reqwest::{Method, Url};
use proxshift_http::{describe, is_certificate_error, Backoff, ClientOptions, Tls};
use ring::digest;

use crate::sigv4::{self, Credentials, Request, Stamp};

/// Where the bucket is and who we are to it.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// `https://rgw.lab.example:7480`, `https://s3.eu-west-1.amazonaws.com`, … (a path after the host
    /// is kept as a prefix of every request's path).
    pub endpoint: String,
    pub bucket: String,
    pub region: String,
    pub credentials: Credentials,
    pub tls: Tls,
    pub timeout: Duration,
}

/// What went wrong, with its cause kept.
#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    #[error("endpoint_url {url:?} {reason}")]
    Endpoint { url: String, reason: &'static str },
    #[error(transparent)]
    Client(#[from] proxshift_http::BuildError),
    #[error("{method} {target}: {}", describe(source))]
    Transport {
        method: String,
        target: String,
        #[source]
        source: proxshift_http::reqwest::Error,
    },
    #[error("{method} {target}: HTTP {status}{}{}", if code.is_empty() { String::new() } else { format!(" {code}") }, if message.is_empty() { String::new() } else { format!(": {message}") })]
    Status {
        method: String,
        target: String,
        status: u16,
        /// S3's error code (`NoSuchBucket`, `SignatureDoesNotMatch`, `AccessDenied`, …), empty when
        /// the body held none.
        code: String,
        message: String,
    },
    #[error("reading {target}: {source}")]
    Body {
        target: String,
        #[source]
        source: std::io::Error,
    },
}

impl S3Error {
    /// The server's certificate was refused: a TLS setting, not the store, is at fault.
    pub fn is_certificate(&self) -> bool {
        matches!(self, S3Error::Transport { source, .. } if is_certificate_error(source))
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            S3Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    fn transient(&self) -> bool {
        match self {
            S3Error::Transport { source, .. } => proxshift_http::is_transient_transport(source),
            S3Error::Status { status, .. } => {
                proxshift_http::is_transient_status(*status) || *status == 500
            }
            _ => false,
        }
    }
}

pub struct Store {
    http: Client,
    base: Url,
    host: String,
    bucket: String,
    region: String,
    creds: Credentials,
    backoff: Backoff,
}

impl Store {
    pub fn new(o: &StoreOptions) -> Result<Store, S3Error> {
        let bad = |reason| S3Error::Endpoint {
            url: o.endpoint.clone(),
            reason,
        };
        let base = Url::parse(o.endpoint.trim_end_matches('/')).map_err(|_| bad("is not a URL"))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad("must start with https:// (or http://)"));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(bad("must not hold a query or a fragment"));
        }
        let host = match (base.host_str(), base.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => return Err(bad("names no host")),
        };
        let http = proxshift_http::client(&ClientOptions {
            tls: o.tls.clone(),
            timeout: o.timeout,
            ..ClientOptions::default()
        })?;
        Ok(Store {
            http,
            base,
            host,
            bucket: o.bucket.clone(),
            region: o.region.clone(),
            creds: o.credentials.clone(),
            backoff: Backoff::default(),
        })
    }

    /// Retry policy for transient failures (tests use [`Backoff::none`]).
    pub fn set_backoff(&mut self, b: Backoff) {
        self.backoff = b;
    }

    /// `s3://bucket/key`: how a result names an object.
    pub fn location(&self, key: &str) -> String {
        format!("s3://{}/{}", self.bucket, key)
    }

    /// The request path of `key` (or of the bucket itself for `None`), not yet encoded.
    fn path(&self, key: Option<&str>) -> String {
        let prefix = self.base.path().trim_end_matches('/');
        match key {
            Some(k) => format!("{prefix}/{}/{}", self.bucket, k.trim_start_matches('/')),
            None => format!("{prefix}/{}", self.bucket),
        }
    }

    fn url(&self, path: &str, query: &str) -> String {
        let origin = self.base.origin().ascii_serialization();
        let q = if query.is_empty() {
            String::new()
        } else {
            format!("?{query}")
        };
        format!("{origin}{}{q}", sigv4::encode_path(path))
    }

    /// A URL that lets whoever holds it upload `key` with one `PUT` for `expires`, without the
    /// credentials. It is a credential while it lasts: never show it.
    pub fn presign_put(&self, key: &str, expires: Duration, now: SystemTime) -> String {
        let path = self.path(Some(key));
        let req = Request {
            method: "PUT",
            host: &self.host,
            path: &path,
            query: vec![],
            headers: vec![],
        };
        let q = sigv4::presigned_query(
            req,
            &self.creds,
            &self.region,
            &Stamp::at(now),
            expires.as_secs(),
        );
        self.url(&path, &q)
    }

    /// One signed request with an empty body, retried while the failure is transient.
    fn send(&self, method: Method, key: Option<&str>) -> Result<Response, S3Error> {
        let path = self.path(key);
        let target = self.location(key.unwrap_or(""));
        self.backoff.retry(
            |_| {
                let req = Request {
                    method: method.as_str(),
                    host: &self.host,
                    path: &path,
                    query: vec![],
                    headers: vec![],
                };
                let empty = sigv4::sha256_hex(b"");
                let headers = sigv4::authorization_headers(
                    req,
                    &empty,
                    &self.creds,
                    &self.region,
                    &Stamp::at(SystemTime::now()),
                );
                let mut rb = self.http.request(method.clone(), self.url(&path, ""));
                for (k, v) in &headers {
                    rb = rb.header(k.as_str(), v.as_str());
                }
                let resp = rb.send().map_err(|source| S3Error::Transport {
                    method: method.to_string(),
                    target: target.clone(),
                    source,
                })?;
                if resp.status().is_success() || resp.status().as_u16() == 404 {
                    return Ok(resp);
                }
                Err(status_error(&method, &target, resp))
            },
            S3Error::transient,
        )
    }

    /// The bucket exists and the credentials may use it.
    pub fn head_bucket(&self) -> Result<(), S3Error> {
        let resp = self.send(Method::HEAD, None)?;
        if resp.status().as_u16() == 404 {
            return Err(S3Error::Status {
                method: "HEAD".into(),
                target: format!("s3://{}", self.bucket),
                status: 404,
                code: "NoSuchBucket".into(),
                message: "the bucket does not exist".into(),
            });
        }
        Ok(())
    }

    /// The object's size, `None` when there is no such object.
    pub fn head_object(&self, key: &str) -> Result<Option<u64>, S3Error> {
        let resp = self.send(Method::HEAD, Some(key))?;
        if resp.status().as_u16() == 404 {
            return Ok(None);
        }
        // The header itself: for a HEAD, reqwest's `content_length()` is the (empty) body's.
        let size = resp
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Ok(Some(size))
    }

    /// The object's size and SHA-256 (hex), read through once; `None` when there is no such object.
    pub fn object_sha256(&self, key: &str) -> Result<Option<(u64, String)>, S3Error> {
        let mut resp = self.send(Method::GET, Some(key))?;
        if resp.status().as_u16() == 404 {
            return Ok(None);
        }
        let mut ctx = digest::Context::new(&digest::SHA256);
        let mut buf = vec![0u8; 64 * 1024];
        let mut size = 0u64;
        loop {
            let n = resp.read(&mut buf).map_err(|source| S3Error::Body {
                target: self.location(key),
                source,
            })?;
            if n == 0 {
                break;
            }
            size += n as u64;
            ctx.update(&buf[..n]);
        }
        Ok(Some((size, sigv4::hex(ctx.finish().as_ref()))))
    }

    /// Delete the object; `false` when there was none (S3 itself answers 204 either way).
    pub fn delete_object(&self, key: &str) -> Result<bool, S3Error> {
        if self.head_object(key)?.is_none() {
            return Ok(false);
        }
        self.send(Method::DELETE, Some(key))?;
        Ok(true)
    }
}

/// An error answer: S3's `<Code>` and `<Message>` from the XML body when it has them.
fn status_error(method: &Method, target: &str, resp: Response) -> S3Error {
    let status = resp.status().as_u16();
    let body = resp.text().unwrap_or_default();
    let tag = |name: &str| {
        let open = format!("<{name}>");
        body.find(&open)
            .and_then(|i| {
                let rest = &body[i + open.len()..];
                rest.find(&format!("</{name}>"))
                    .map(|j| rest[..j].trim().to_string())
            })
            .unwrap_or_default()
    };
    S3Error::Status {
        method: method.to_string(),
        target: target.to_string(),
        status,
        code: tag("Code"),
        message: tag("Message"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(endpoint: &str) -> Result<Store, S3Error> {
        Store::new(&StoreOptions {
            endpoint: endpoint.into(),
            bucket: "backups".into(),
            region: "us-east-1".into(),
            credentials: Credentials {
                access_key: "AK".into(),
                secret_key: "SK".into(),
                session_token: None,
            },
            tls: Tls::verified(),
            timeout: Duration::from_secs(5),
        })
    }

    #[test]
    fn a_bad_endpoint_is_named_with_the_reason() {
        for (url, reason) in [
            ("rgw.lab", "is not a URL"),
            ("rgw.lab:7480", "must start with https://"),
            ("ftp://rgw.lab", "must start with https://"),
            ("https://rgw.lab/?x=1", "must not hold a query"),
        ] {
            let e = store(url).err().expect(url).to_string();
            assert!(
                e.starts_with("endpoint_url") && e.contains(reason),
                "{url}: {e}"
            );
        }
    }

    #[test]
    fn objects_are_addressed_path_style_under_the_endpoint_path() {
        let s = store("https://gw.lab:9000/s3/").unwrap();
        assert_eq!(s.host, "gw.lab:9000");
        assert_eq!(
            s.path(Some("etcd/a b/snapshot.db")),
            "/s3/backups/etcd/a b/snapshot.db"
        );
        assert_eq!(s.url(&s.path(None), ""), "https://gw.lab:9000/s3/backups");
        let put = s.presign_put(
            "etcd/x.db",
            Duration::from_secs(600),
            SystemTime::UNIX_EPOCH,
        );
        assert!(
            put.starts_with(
                "https://gw.lab:9000/s3/backups/etcd/x.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&"
            ),
            "{put}"
        );
        assert!(put.contains("X-Amz-Expires=600&"), "{put}");
        let default_port = store("https://s3.example.com").unwrap();
        assert_eq!(default_port.host, "s3.example.com");
        assert_eq!(default_port.location("k/x"), "s3://backups/k/x");
    }
}
