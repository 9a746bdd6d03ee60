//! Format checks for the secret-ish strings: pull secret JSON, SSH public key, PEM trust bundle,
//! proxy URLs and image repositories. Pure functions returning a reason on failure.

use serde_json::Value;

/// Standard base64 (with or without padding) to bytes.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let body = s.trim_end_matches('=');
    if s.len() - body.len() > 2 || body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    let (mut acc, mut n) = (0u32, 0);
    for c in body.bytes() {
        acc = (acc << 6) | val(c)?;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((acc >> n) as u8);
            acc &= (1 << n) - 1;
        }
    }
    Some(out)
}

/// A pull secret: a JSON object with a non-empty `auths` map whose entries carry `auth` or
/// `credsStore` (the installer's rule). Returns the `auth` values, which are secrets too.
pub fn check_pull_secret(s: &str) -> Result<Vec<String>, String> {
    let v: Value = serde_json::from_str(s)
        .map_err(|e| format!("is not valid JSON ({})", e.classify_name()))?;
    let auths = v
        .get("auths")
        .and_then(Value::as_object)
        .ok_or("has no 'auths' object (expected {\"auths\": {\"registry\": {\"auth\": …}}})")?;
    if auths.is_empty() {
        return Err("has an empty 'auths' object".into());
    }
    let mut secrets = Vec::new();
    for (registry, entry) in auths {
        let auth = entry
            .get("auth")
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty());
        if auth.is_none() && entry.get("credsStore").is_none() {
            return Err(format!(
                "entry for registry '{registry}' has neither 'auth' nor 'credsStore'"
            ));
        }
        secrets.extend(auth.map(str::to_string));
    }
    Ok(secrets)
}

trait Classify {
    fn classify_name(&self) -> &'static str;
}
impl Classify for serde_json::Error {
    // The JSON error position only; serde's message could quote part of the secret.
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "I/O error",
            serde_json::error::Category::Syntax => "syntax error",
            serde_json::error::Category::Data => "unexpected data",
            serde_json::error::Category::Eof => "unexpected end of input",
        }
    }
}

const SSH_TYPES: &[&str] = &[
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "ssh-dss",
];

/// authorized_keys lines `TYPE BASE64 [comment]` (one key, or several on separate lines), each blob
/// naming the same key type as its line; with FIPS only RSA and ECDSA keys. Returns the key types.
pub fn check_ssh_key(s: &str, fips: bool) -> Result<Vec<String>, String> {
    let lines: Vec<&str> = s.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if lines.is_empty() {
        return Err("is empty".into());
    }
    let many = lines.len() > 1;
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            check_ssh_line(l, fips).map_err(|e| {
                if many {
                    format!("line {}: {e}", i + 1)
                } else {
                    e
                }
            })
        })
        .collect()
}

fn check_ssh_line(line: &str, fips: bool) -> Result<String, String> {
    let mut parts = line.split_whitespace();
    let ty = parts.next().unwrap_or_default();
    if !SSH_TYPES.contains(&ty) {
        return Err(format!(
            "key type '{ty}' is not an SSH public key type (expected one of {})",
            SSH_TYPES.join(", ")
        ));
    }
    let blob = parts
        .next()
        .and_then(base64_decode)
        .ok_or("the key data is missing or not base64")?;
    let named = blob
        .get(..4)
        .map(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize)
        .and_then(|n| blob.get(4..4 + n))
        .ok_or("the key data is truncated")?;
    if named != ty.as_bytes() {
        return Err(format!(
            "the key data is a '{}' key but the line says '{ty}'",
            String::from_utf8_lossy(named)
        ));
    }
    if fips && !(ty == "ssh-rsa" || ty.starts_with("ecdsa-sha2-nistp")) {
        return Err(format!(
            "'{ty}' keys are not allowed with fips: true (use ssh-rsa or ecdsa-sha2-nistp*)"
        ));
    }
    Ok(ty.to_string())
}

/// Every PEM block of a trust bundle is a CERTIFICATE whose body is a DER SEQUENCE holding the
/// tbsCertificate SEQUENCE (a structural x509 check). Text between blocks is ignored, like Go's
/// `pem.Decode`. Returns the number of certificates.
pub fn check_pem_bundle(s: &str) -> Result<usize, String> {
    let mut count = 0;
    let mut rest = s;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + 11..];
        let label_end = after
            .find("-----")
            .ok_or("a BEGIN line is not terminated with -----")?;
        let label = &after[..label_end];
        let body_start = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let end = body_start
            .find(&end_marker)
            .ok_or_else(|| format!("PEM block {} has no '{end_marker}' line", count + 1))?;
        count += 1;
        if label != "CERTIFICATE" {
            return Err(format!(
                "PEM block {count} is a '{label}', not a CERTIFICATE"
            ));
        }
        let b64: String = body_start[..end].split_whitespace().collect();
        let der =
            base64_decode(&b64).ok_or_else(|| format!("PEM block {count} is not valid base64"))?;
        check_der_certificate(&der)
            .map_err(|e| format!("PEM block {count} is not an x509 certificate: {e}"))?;
        rest = &body_start[end + end_marker.len()..];
    }
    if count == 0 {
        return Err("holds no PEM block (expected -----BEGIN CERTIFICATE----- …)".into());
    }
    Ok(count)
}

/// DER tag + length at `at`: (tag, content start, content length).
fn der_header(der: &[u8], at: usize) -> Option<(u8, usize, usize)> {
    let tag = *der.get(at)?;
    let first = *der.get(at + 1)? as usize;
    if first < 0x80 {
        return Some((tag, at + 2, first));
    }
    let n = first & 0x7f;
    if n == 0 || n > 4 {
        return None;
    }
    let mut len = 0usize;
    for i in 0..n {
        len = (len << 8) | *der.get(at + 2 + i)? as usize;
    }
    Some((tag, at + 2 + n, len))
}

fn check_der_certificate(der: &[u8]) -> Result<(), String> {
    let (tag, start, len) = der_header(der, 0).ok_or("truncated DER")?;
    if tag != 0x30 || start + len != der.len() {
        return Err("the outer DER SEQUENCE does not span the block".into());
    }
    // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE, signatureAlgorithm SEQUENCE, signature BIT STRING }
    let (t1, s1, l1) = der_header(der, start).ok_or("truncated tbsCertificate")?;
    let (t2, s2, l2) = der_header(der, s1 + l1).ok_or("truncated signatureAlgorithm")?;
    let (t3, s3, l3) = der_header(der, s2 + l2).ok_or("truncated signature")?;
    if t1 != 0x30 || t2 != 0x30 || t3 != 0x03 || s3 + l3 != der.len() {
        return Err("not a Certificate (tbsCertificate, signatureAlgorithm, signature)".into());
    }
    Ok(())
}

/// `scheme://[user@]host[:port][/…]`: returns (scheme, host).
pub fn parse_url(s: &str) -> Result<(String, String), String> {
    let (scheme, rest) = s
        .split_once("://")
        .ok_or_else(|| format!("'{s}' is not a URL (expected scheme://host[:port])"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let hostport = authority.rsplit('@').next().unwrap_or_default();
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default().to_string()
    } else {
        hostport.split(':').next().unwrap_or_default().to_string()
    };
    if host.is_empty() || s.contains(char::is_whitespace) {
        return Err(format!("'{s}' has no host or contains spaces"));
    }
    if let Some(port) = hostport
        .rsplit_once(':')
        .map(|(_, p)| p)
        .filter(|p| !p.contains(']') && !hostport.starts_with('['))
    {
        if port.parse::<u16>().is_err() {
            return Err(format!("'{s}' has an invalid port '{port}'"));
        }
    }
    Ok((scheme.to_ascii_lowercase(), host))
}

/// An image repository `host[:port][/path…]` without tag or digest, as the installer requires for
/// mirror sources and mirrors.
pub fn check_repository(s: &str) -> Result<(), String> {
    if s.is_empty() || s.contains(char::is_whitespace) || s.contains("://") {
        return Err(format!(
            "'{s}' is not a repository (expected host[:port]/path, no scheme)"
        ));
    }
    if s.contains('@') {
        return Err(format!("'{s}' contains a digest; give the repository only"));
    }
    let mut parts = s.split('/');
    let host = parts.next().unwrap_or_default();
    let (h, port) = host
        .split_once(':')
        .map_or((host, None), |(h, p)| (h, Some(p)));
    if h.is_empty()
        || !h
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    {
        return Err(format!("'{s}' has an invalid registry host '{host}'"));
    }
    if port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return Err(format!("'{s}' has an invalid registry port"));
    }
    for comp in parts {
        if comp.contains(':') {
            return Err(format!("'{s}' contains a tag; give the repository only"));
        }
        let ok = !comp.is_empty()
            && comp
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
        if !ok {
            return Err(format!(
                "'{s}' has an invalid path component '{comp}' (lowercase letters, digits, . _ -)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A real self-signed certificate (generated for these tests; no key is kept anywhere).
    pub const TEST_CERT: &str = include_str!("../tests/fixtures/test-ca.pem");
    /// ssh-ed25519 public key generated for tests.
    pub const TEST_SSH_KEY: &str = include_str!("../tests/fixtures/test-ssh-key.pub");

    #[test]
    fn base64() {
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("aGVsbG8").unwrap(), b"hello");
        assert!(base64_decode("a").is_none());
        assert!(base64_decode("a$bc").is_none());
    }

    #[test]
    fn pull_secrets() {
        assert_eq!(
            check_pull_secret(r#"{"auths":{"q.io":{"auth":"eHg6eXk="}}}"#).unwrap(),
            vec!["eHg6eXk="]
        );
        assert!(
            check_pull_secret(r#"{"auths":{"q.io":{"credsStore":"x"}}}"#)
                .unwrap()
                .is_empty()
        );
        assert!(check_pull_secret("{not json")
            .unwrap_err()
            .contains("not valid JSON"));
        assert!(check_pull_secret(r#"{"x":1}"#)
            .unwrap_err()
            .contains("no 'auths'"));
        assert!(check_pull_secret(r#"{"auths":{}}"#)
            .unwrap_err()
            .contains("empty"));
        assert!(check_pull_secret(r#"{"auths":{"q.io":{"email":"a"}}}"#)
            .unwrap_err()
            .contains("neither"));
    }

    #[test]
    fn ssh_keys() {
        assert_eq!(check_ssh_key(TEST_SSH_KEY, false).unwrap(), ["ssh-ed25519"]);
        assert!(check_ssh_key(TEST_SSH_KEY, true)
            .unwrap_err()
            .contains("fips"));
        let swapped = TEST_SSH_KEY.replacen("ssh-ed25519", "ssh-rsa", 1);
        assert!(check_ssh_key(&swapped, false)
            .unwrap_err()
            .contains("is a 'ssh-ed25519' key"));
        assert!(check_ssh_key("ssh-ed25519 !!!", false).is_err());
        assert!(check_ssh_key("hello world", false)
            .unwrap_err()
            .contains("key type"));
        let two = format!("{TEST_SSH_KEY}\n{TEST_SSH_KEY}");
        assert_eq!(check_ssh_key(&two, false).unwrap().len(), 2);
        let second_bad = format!("{TEST_SSH_KEY}\nssh-rsa AAAA");
        assert!(check_ssh_key(&second_bad, false)
            .unwrap_err()
            .starts_with("line 2:"));
    }

    #[test]
    fn pem_bundles() {
        assert_eq!(check_pem_bundle(TEST_CERT).unwrap(), 1);
        assert_eq!(
            check_pem_bundle(&format!("# root\n{TEST_CERT}\n# again\n{TEST_CERT}")).unwrap(),
            2
        );
        assert!(check_pem_bundle("nothing")
            .unwrap_err()
            .contains("no PEM block"));
        // Built from parts so the tree holds no literal private-key header.
        let key = concat!(
            "-----BEGIN ",
            "PRIVATE KEY-----\nAAAA\n-----END ",
            "PRIVATE KEY-----\n"
        );
        assert!(check_pem_bundle(key)
            .unwrap_err()
            .contains("not a CERTIFICATE"));
        let garbled = "-----BEGIN CERTIFICATE-----\nMIIBBBBB\n-----END CERTIFICATE-----\n";
        assert!(check_pem_bundle(garbled)
            .unwrap_err()
            .contains("not an x509"));
        let cut = TEST_CERT.replace("-----END CERTIFICATE-----", "");
        assert!(check_pem_bundle(&cut).unwrap_err().contains("no '-----END"));
    }

    #[test]
    fn urls_and_repos() {
        assert_eq!(
            parse_url("http://user:pw@proxy.lab:3128").unwrap(),
            ("http".into(), "proxy.lab".into())
        );
        assert!(parse_url("proxy.lab:3128").is_err());
        assert!(parse_url("http://proxy.lab:99999").is_err());
        assert!(check_repository("mirror.lab:5000/ocp4/openshift-release-dev").is_ok());
        assert!(check_repository("quay.io/openshift-release-dev/ocp-release").is_ok());
        assert!(check_repository("mirror.lab:5000").is_ok());
        assert!(check_repository("quay.io/ocp/release:4.16")
            .unwrap_err()
            .contains("tag"));
        assert!(check_repository("quay.io/ocp@sha256:abc")
            .unwrap_err()
            .contains("digest"));
        assert!(check_repository("https://quay.io/x").is_err());
    }
}
