//! AWS Signature Version 4 for S3, pure: no clock, no I/O. The steps and names follow AWS's "Signature
//! Version 4 signing process" for S3 ("Signature Calculations for the Authorization Header" and "Query
//! String Authentication"): a canonical request, the string to sign over its hash, and a signing key
//! derived from the secret, the day, the region and the service.

use std::fmt::Write as _;
use std::time::SystemTime;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use ring::{digest, hmac};

/// The hash S3 expects in `x-amz-content-sha256` for a request whose body is not signed.
pub const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";
const ALGORITHM: &str = "AWS4-HMAC-SHA256";
const SERVICE: &str = "s3";

/// Everything but the unreserved characters (`A-Z a-z 0-9 - _ . ~`), as SigV4's `UriEncode` wants.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');
/// The same, keeping `/` (an object key's path separators stay as they are in the canonical URI).
const PATH: &AsciiSet = &UNRESERVED.remove(b'/');

/// An access key and its secret, with the session token of temporary credentials.
#[derive(Clone)]
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

/// The moment a request is signed, in SigV4's two forms (`20130524T000000Z`, `20130524`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    pub datetime: String,
    pub date: String,
}

impl Stamp {
    pub fn at(t: SystemTime) -> Stamp {
        // "2013-05-24T00:00:00Z" → "20130524T000000Z"
        let iso = humantime::format_rfc3339_seconds(t).to_string();
        let datetime: String = iso.chars().filter(|c| *c != '-' && *c != ':').collect();
        Stamp {
            date: datetime[..8].to_string(),
            datetime,
        }
    }
}

/// One request to sign: the method, the host (with a non-default port), the path as sent
/// (`/bucket/key`, not yet encoded), the query parameters (not yet encoded) and the headers to sign
/// besides `host`.
pub struct Request<'a> {
    pub method: &'a str,
    pub host: &'a str,
    pub path: &'a str,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
}

/// `UriEncode` of a path: every byte but the unreserved ones and `/`.
pub fn encode_path(path: &str) -> String {
    utf8_percent_encode(path, PATH).to_string()
}

/// `UriEncode` of a query key or value (`/` encoded too).
pub fn encode_query(s: &str) -> String {
    utf8_percent_encode(s, UNRESERVED).to_string()
}

/// The query string in canonical order (by encoded key, then value), encoded.
pub fn canonical_query(query: &[(String, String)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (encode_query(k), encode_query(v)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// The signed headers, `host` included: lower-case names, trimmed values, sorted by name.
fn canonical_headers(req: &Request) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> =
        std::iter::once(("host".to_string(), req.host.to_string()))
            .chain(req.headers.iter().map(|(k, v)| {
                (
                    k.to_ascii_lowercase(),
                    v.split_whitespace().collect::<Vec<_>>().join(" "),
                )
            }))
            .collect();
    all.sort();
    all
}

/// The canonical request and its `SignedHeaders` list.
pub fn canonical_request(req: &Request, payload_hash: &str) -> (String, String) {
    let headers = canonical_headers(req);
    let signed = headers
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let mut text = String::new();
    let _ = writeln!(text, "{}", req.method);
    let _ = writeln!(text, "{}", encode_path(req.path));
    let _ = writeln!(text, "{}", canonical_query(&req.query));
    for (k, v) in &headers {
        let _ = writeln!(text, "{k}:{v}");
    }
    let _ = writeln!(text);
    let _ = writeln!(text, "{signed}");
    text.push_str(payload_hash);
    (text, signed)
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn scope(stamp: &Stamp, region: &str) -> String {
    format!("{}/{region}/{SERVICE}/aws4_request", stamp.date)
}

/// The signature of `canonical` for `region` at `stamp`.
pub fn signature(canonical: &str, creds: &Credentials, region: &str, stamp: &Stamp) -> String {
    let to_sign = format!(
        "{ALGORITHM}\n{}\n{}\n{}",
        stamp.datetime,
        scope(stamp, region),
        sha256_hex(canonical.as_bytes())
    );
    let step = |key: &[u8], data: &str| {
        hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
    };
    let k_date = step(format!("AWS4{}", creds.secret_key).as_bytes(), &stamp.date);
    let k_region = step(k_date.as_ref(), region);
    let k_service = step(k_region.as_ref(), SERVICE);
    let k_signing = step(k_service.as_ref(), "aws4_request");
    hex(step(k_signing.as_ref(), &to_sign).as_ref())
}

/// The headers a request signed in its `Authorization` header carries: `x-amz-date`,
/// `x-amz-content-sha256`, the session token if any, and `Authorization` itself. `req.headers` must
/// not hold those already; they are added to what is signed here.
pub fn authorization_headers(
    mut req: Request,
    payload_hash: &str,
    creds: &Credentials,
    region: &str,
    stamp: &Stamp,
) -> Vec<(String, String)> {
    let mut added = vec![
        ("x-amz-content-sha256".to_string(), payload_hash.to_string()),
        ("x-amz-date".to_string(), stamp.datetime.clone()),
    ];
    if let Some(t) = &creds.session_token {
        added.push(("x-amz-security-token".to_string(), t.clone()));
    }
    req.headers.extend(added.iter().cloned());
    let (canonical, signed) = canonical_request(&req, payload_hash);
    let sig = signature(&canonical, creds, region, stamp);
    added.push((
        "authorization".to_string(),
        format!(
            "{ALGORITHM} Credential={}/{},SignedHeaders={signed},Signature={sig}",
            creds.access_key,
            scope(stamp, region)
        ),
    ));
    added
}

/// The query string of a presigned URL for `req` (only `host` signed, the payload unsigned), valid
/// `expires` seconds from `stamp` (S3 takes 1 to 604800).
pub fn presigned_query(
    mut req: Request,
    creds: &Credentials,
    region: &str,
    stamp: &Stamp,
    expires: u64,
) -> String {
    req.headers.clear();
    req.query.extend([
        ("X-Amz-Algorithm".to_string(), ALGORITHM.to_string()),
        (
            "X-Amz-Credential".to_string(),
            format!("{}/{}", creds.access_key, scope(stamp, region)),
        ),
        ("X-Amz-Date".to_string(), stamp.datetime.clone()),
        (
            "X-Amz-Expires".to_string(),
            expires.clamp(1, 604_800).to_string(),
        ),
        ("X-Amz-SignedHeaders".to_string(), "host".to_string()),
    ]);
    if let Some(t) = &creds.session_token {
        req.query
            .push(("X-Amz-Security-Token".to_string(), t.clone()));
    }
    let (canonical, _) = canonical_request(&req, UNSIGNED_PAYLOAD);
    let sig = signature(&canonical, creds, region, stamp);
    format!("{}&X-Amz-Signature={sig}", canonical_query(&req.query))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    // AWS's own worked examples (Amazon S3 API Reference, "Signature Calculations for the Authorization
    // Header: Transferring Payload in a Single Chunk" and "Authenticating Requests: Using Query
    // Parameters"): the example key pair, bucket `examplebucket`, 24 May 2013 00:00:00 UTC.
    fn example() -> (Credentials, Stamp) {
        let creds = Credentials {
            access_key: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        };
        (
            creds,
            Stamp::at(UNIX_EPOCH + Duration::from_secs(1_369_353_600)),
        )
    }

    #[test]
    fn the_stamp_is_in_both_forms() {
        let (_, stamp) = example();
        assert_eq!(stamp.datetime, "20130524T000000Z");
        assert_eq!(stamp.date, "20130524");
    }

    #[test]
    fn a_get_signed_in_its_header_matches_aws_example() {
        let (creds, stamp) = example();
        let empty = sha256_hex(b"");
        let req = Request {
            method: "GET",
            host: "examplebucket.s3.amazonaws.com",
            path: "/test.txt",
            query: vec![],
            headers: vec![("Range".into(), "bytes=0-9".into())],
        };
        let headers = authorization_headers(req, &empty, &creds, "us-east-1", &stamp);
        let auth = &headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .unwrap()
            .1;
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,\
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,\
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn a_presigned_get_matches_aws_example() {
        let (creds, stamp) = example();
        let req = Request {
            method: "GET",
            host: "examplebucket.s3.amazonaws.com",
            path: "/test.txt",
            query: vec![],
            headers: vec![],
        };
        let q = presigned_query(req, &creds, "us-east-1", &stamp, 86400);
        assert!(q.starts_with(
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request\
             &X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
        ), "{q}");
        assert!(
            q.ends_with(
                "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
            ),
            "{q}"
        );
    }

    /// A PUT of object `k` in bucket `b`, for the presigning tests.
    fn put_request() -> Request<'static> {
        Request {
            method: "PUT",
            host: "h",
            path: "/b/k",
            query: vec![],
            headers: vec![],
        }
    }

    #[test]
    fn a_session_token_is_signed_too() {
        let (mut creds, stamp) = example();
        let without = presigned_query(put_request(), &creds, "us-east-1", &stamp, 60);
        creds.session_token = Some("tok/en".into());
        let with = presigned_query(put_request(), &creds, "us-east-1", &stamp, 60);
        assert!(with.contains("X-Amz-Security-Token=tok%2Fen"), "{with}");
        assert_ne!(without.rsplit('=').next(), with.rsplit('=').next());
    }

    #[test]
    fn paths_keep_their_slashes_and_queries_do_not() {
        assert_eq!(
            encode_path("/b/etcd backup/ä~x"),
            "/b/etcd%20backup/%C3%A4~x"
        );
        assert_eq!(encode_query("a/b c"), "a%2Fb%20c");
        assert_eq!(
            canonical_query(&[
                ("prefix".into(), "x/".into()),
                ("list-type".into(), "2".into())
            ]),
            "list-type=2&prefix=x%2F"
        );
    }

    #[test]
    fn the_expiry_stays_within_what_s3_takes() {
        let (creds, stamp) = example();
        assert!(
            presigned_query(put_request(), &creds, "r", &stamp, 10_000_000)
                .contains("X-Amz-Expires=604800&")
        );
        assert!(presigned_query(put_request(), &creds, "r", &stamp, 0).contains("X-Amz-Expires=1&"));
    }

    #[test]
    fn the_secret_never_shows_in_debug_output() {
        let (creds, _) = example();
        assert!(!format!("{creds:?}").contains("EXAMPLEKEY"));
    }
}
