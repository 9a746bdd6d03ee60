//! Format checks for the secret-ish strings: pull secret JSON, SSH public key, PEM trust bundle,
//! proxy URLs and image repositories. Pure functions returning a reason on failure.

use serde_json::Value;

/// Why a pull secret is rejected.
#[derive(Debug, thiserror::Error)]
pub enum PullSecretError {
    /// Only the category of the JSON error is kept: serde's message could quote part of the secret.
    #[error("is not valid JSON ({})", category_name(*.0))]
    NotJson(serde_json::error::Category),
    #[error("has no 'auths' object (expected {{\"auths\": {{\"registry\": {{\"auth\": …}}}}}})")]
    NoAuths,
    #[error("has an empty 'auths' object")]
    EmptyAuths,
    #[error("entry for registry '{0}' has neither 'auth' nor 'credsStore'")]
    NoCredentials(String),
}

/// Why an authorized_keys text is rejected.
#[derive(Debug, thiserror::Error)]
pub enum SshKeyError {
    #[error("is empty")]
    Empty,
    /// The only key line is wrong.
    #[error(transparent)]
    Key(SshLineError),
    /// Line `line` (1-based) of several is wrong.
    #[error("line {line}: {source}")]
    Line {
        line: usize,
        #[source]
        source: SshLineError,
    },
}

/// Why one authorized_keys line is not an acceptable public key.
#[derive(Debug, thiserror::Error)]
pub enum SshLineError {
    #[error("key type '{ty}' is not an SSH public key type (expected one of {})", SSH_TYPES.join(", "))]
    UnknownType { ty: String },
    #[error("the key data is missing or not base64")]
    NotBase64,
    #[error("the key data is truncated")]
    Truncated,
    #[error("the key data is a '{blob}' key but the line says '{line}'")]
    TypeMismatch { blob: String, line: String },
    #[error("'{0}' keys are not allowed with fips: true (use ssh-rsa or ecdsa-sha2-nistp*)")]
    NotFips(String),
}

/// Why a PEM trust bundle is rejected (`block` counts from 1).
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    #[error("a BEGIN line is not terminated with -----")]
    UnterminatedBegin,
    #[error("PEM block {block} has no '{marker}' line")]
    NoEnd { block: usize, marker: String },
    #[error("PEM block {block} is a '{label}', not a CERTIFICATE")]
    NotCertificate { block: usize, label: String },
    #[error("PEM block {block} is not valid base64")]
    NotBase64 { block: usize },
    #[error("PEM block {block} is not an x509 certificate: {source}")]
    NotX509 {
        block: usize,
        #[source]
        source: DerError,
    },
    #[error("holds no PEM block (expected -----BEGIN CERTIFICATE----- …)")]
    NoBlock,
    #[error("has text after the END line of PEM block {block}: invalid block (the installer's validate.CABundle accepts nothing but certificates after the last one, not even a blank line)")]
    TrailingText { block: usize },
    #[error("has text after '-----END CERTIFICATE-----' on the END line of PEM block {block}: invalid block")]
    EndLineText { block: usize },
}

/// Why a DER blob is not shaped like an x509 Certificate.
#[derive(Debug, thiserror::Error)]
pub enum DerError {
    /// What was cut off: `DER`, `tbsCertificate`, …
    #[error("truncated {0}")]
    Truncated(&'static str),
    #[error("the outer DER SEQUENCE does not span the block")]
    OuterSpan,
    #[error("not a Certificate (tbsCertificate, signatureAlgorithm, signature)")]
    NotCertificate,
}

/// Why a proxy URL is rejected.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    #[error("'{0}' is not a URL (expected scheme://host[:port])")]
    NotUrl(String),
    #[error("'{0}' has no host or contains spaces")]
    NoHost(String),
    #[error("'{url}' has an invalid port '{port}'")]
    Port { url: String, port: String },
}

/// Why an image repository reference is rejected.
#[derive(Debug, thiserror::Error)]
pub enum RepositoryError {
    #[error("'{0}' is not a repository (expected host[:port]/path, no scheme)")]
    NotRepository(String),
    #[error("'{0}' contains a digest; give the repository only")]
    Digest(String),
    #[error("'{repo}' has an invalid registry host '{host}'")]
    Host { repo: String, host: String },
    #[error("'{0}' has an invalid registry port")]
    Port(String),
    #[error("'{repo}' names no registry host: '{first}' is taken as a path (a host has a '.' or a ':port', or is localhost), e.g. registry.example.com/{repo}")]
    NoRegistryHost { repo: String, first: String },
    #[error("'{0}' contains a tag; give the repository only")]
    Tag(String),
    #[error(
        "'{repo}' has an invalid path component '{component}': lower-case letters and digits, joined by one '.', '_', '__' or dashes; no separator at either end and none doubled (the docker reference grammar the installer parses with)"
    )]
    Component { repo: String, component: String },
    #[error("'{0}' is longer than the 255 characters a repository name may have")]
    TooLong(String),
}

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
pub fn check_pull_secret(s: &str) -> Result<Vec<String>, PullSecretError> {
    let v: Value = serde_json::from_str(s).map_err(|e| PullSecretError::NotJson(e.classify()))?;
    let auths = v
        .get("auths")
        .and_then(Value::as_object)
        .ok_or(PullSecretError::NoAuths)?;
    if auths.is_empty() {
        return Err(PullSecretError::EmptyAuths);
    }
    let mut secrets = Vec::new();
    for (registry, entry) in auths {
        let auth = entry
            .get("auth")
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty());
        if auth.is_none() && entry.get("credsStore").is_none() {
            return Err(PullSecretError::NoCredentials(registry.clone()));
        }
        secrets.extend(auth.map(str::to_string));
    }
    Ok(secrets)
}

/// The JSON error's category in words.
fn category_name(c: serde_json::error::Category) -> &'static str {
    match c {
        serde_json::error::Category::Io => "I/O error",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "unexpected data",
        serde_json::error::Category::Eof => "unexpected end of input",
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
pub fn check_ssh_key(s: &str, fips: bool) -> Result<Vec<String>, SshKeyError> {
    let lines: Vec<&str> = s.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if lines.is_empty() {
        return Err(SshKeyError::Empty);
    }
    let many = lines.len() > 1;
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            check_ssh_line(l, fips).map_err(|source| {
                if many {
                    SshKeyError::Line {
                        line: i + 1,
                        source,
                    }
                } else {
                    SshKeyError::Key(source)
                }
            })
        })
        .collect()
}

fn check_ssh_line(line: &str, fips: bool) -> Result<String, SshLineError> {
    let mut parts = line.split_whitespace();
    let ty = parts.next().unwrap_or_default();
    if !SSH_TYPES.contains(&ty) {
        return Err(SshLineError::UnknownType { ty: ty.into() });
    }
    let blob = parts
        .next()
        .and_then(base64_decode)
        .ok_or(SshLineError::NotBase64)?;
    let named = blob
        .get(..4)
        .map(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize)
        .and_then(|n| blob.get(4..4 + n))
        .ok_or(SshLineError::Truncated)?;
    if named != ty.as_bytes() {
        return Err(SshLineError::TypeMismatch {
            blob: String::from_utf8_lossy(named).into(),
            line: ty.into(),
        });
    }
    if fips && !(ty == "ssh-rsa" || ty.starts_with("ecdsa-sha2-nistp")) {
        return Err(SshLineError::NotFips(ty.into()));
    }
    Ok(ty.to_string())
}

/// Every PEM block of a trust bundle is a CERTIFICATE whose body is a DER SEQUENCE holding the
/// tbsCertificate SEQUENCE (a structural x509 check). Text between blocks is ignored, like Go's
/// `pem.Decode`. Returns the number of certificates.
/// The trust bundle as it is rendered: every line's trailing white space and the blank lines after
/// the last block removed, one final newline. A PEM file read with a trailing blank line (or CRLF line
/// ends) then passes the installer's `validate.CABundle`, which refuses anything after the last
/// block's END line; what is left after this (trailing text) is refused by [`check_pem_bundle`].
pub fn normalize_pem_bundle(s: &str) -> String {
    let lines: Vec<&str> = s.lines().map(str::trim_end).collect();
    let mut out = lines.join("\n").trim_end().to_string();
    out.push('\n');
    out
}

/// Every PEM block is an x509 certificate, as the installer's `validate.CABundle`
/// (pkg/validate/validate.go) reads the bundle with Go's `pem.Decode` and `x509.ParseCertificate`:
/// text before a block is skipped, the END line may carry only white space, and after the last
/// block's END line (and its line ending) nothing may follow ("invalid block"). Returns the count.
pub fn check_pem_bundle(s: &str) -> Result<usize, PemError> {
    let mut count = 0;
    let mut rest = s;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + 11..];
        let label_end = after.find("-----").ok_or(PemError::UnterminatedBegin)?;
        let label = &after[..label_end];
        let body_start = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(end) = body_start.find(&end_marker) else {
            return Err(PemError::NoEnd {
                block: count + 1,
                marker: end_marker,
            });
        };
        count += 1;
        if label != "CERTIFICATE" {
            return Err(PemError::NotCertificate {
                block: count,
                label: label.into(),
            });
        }
        let b64: String = body_start[..end].split_whitespace().collect();
        let der = base64_decode(&b64).ok_or(PemError::NotBase64 { block: count })?;
        check_der_certificate(&der).map_err(|source| PemError::NotX509 {
            block: count,
            source,
        })?;
        let after = &body_start[end + end_marker.len()..];
        let (end_line, next) = after.split_once('\n').unwrap_or((after, ""));
        if !end_line.trim_matches([' ', '\t', '\r']).is_empty() {
            return Err(PemError::EndLineText { block: count });
        }
        rest = next;
    }
    if count == 0 {
        return Err(PemError::NoBlock);
    }
    if !rest.is_empty() {
        return Err(PemError::TrailingText { block: count });
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

fn check_der_certificate(der: &[u8]) -> Result<(), DerError> {
    let (tag, start, len) = der_header(der, 0).ok_or(DerError::Truncated("DER"))?;
    if tag != 0x30 || start + len != der.len() {
        return Err(DerError::OuterSpan);
    }
    // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE, signatureAlgorithm SEQUENCE, signature BIT STRING }
    let truncated = DerError::Truncated;
    let (t1, s1, l1) = der_header(der, start).ok_or(truncated("tbsCertificate"))?;
    let (t2, s2, l2) = der_header(der, s1 + l1).ok_or(truncated("signatureAlgorithm"))?;
    let (t3, s3, l3) = der_header(der, s2 + l2).ok_or(truncated("signature"))?;
    if t1 != 0x30 || t2 != 0x30 || t3 != 0x03 || s3 + l3 != der.len() {
        return Err(DerError::NotCertificate);
    }
    Ok(())
}

/// `scheme://[user@]host[:port][/…]`: returns (scheme, host).
pub fn parse_url(s: &str) -> Result<(String, String), UrlError> {
    let (scheme, rest) = s
        .split_once("://")
        .ok_or_else(|| UrlError::NotUrl(s.into()))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let hostport = authority.rsplit('@').next().unwrap_or_default();
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default().to_string()
    } else {
        hostport.split(':').next().unwrap_or_default().to_string()
    };
    if host.is_empty() || s.contains(char::is_whitespace) {
        return Err(UrlError::NoHost(s.into()));
    }
    if let Some(port) = hostport
        .rsplit_once(':')
        .map(|(_, p)| p)
        .filter(|p| !p.contains(']') && !hostport.starts_with('['))
    {
        if port.parse::<u16>().is_err() {
            return Err(UrlError::Port {
                url: s.into(),
                port: port.into(),
            });
        }
    }
    Ok((scheme.to_ascii_lowercase(), host))
}

/// containers/image `splitDockerDomain`: the first component is a registry host when it has a
/// '.' or a ':', is `localhost`, or has an uppercase letter.
fn names_registry(first: &str) -> bool {
    first.contains(['.', ':'])
        || first == "localhost"
        || first.bytes().any(|b| b.is_ascii_uppercase())
}

/// An image repository `host[:port][/path…]` without tag or digest, as the installer's
/// `validateNamedRepository` (pkg/types/validation/installconfig.go) requires for mirror sources
/// and mirrors: containers/image `reference.ParseNamed` with its docker reference grammar
/// (docker/reference/regexp.go), and for a name that is not canonical (no registry host) its
/// fallback, a DNS-1123 host with an optional port.
pub fn check_repository(s: &str) -> Result<(), RepositoryError> {
    if s.is_empty() || s.contains(char::is_whitespace) || s.contains("://") {
        return Err(RepositoryError::NotRepository(s.into()));
    }
    if s.contains('@') {
        return Err(RepositoryError::Digest(s.into()));
    }
    let Some((host, path)) = s.split_once('/') else {
        return check_bare_host(s);
    };
    if !names_registry(host) {
        // `reference.ParseNamed` takes a first component without '.', ':' or uppercase, other
        // than `localhost`, as a path under docker.io, not canonical; the fallback that follows
        // accepts only a bare `host[:port]`, so `openshift/release` is refused.
        return Err(RepositoryError::NoRegistryHost {
            repo: s.into(),
            first: host.into(),
        });
    }
    check_domain(s, host)?;
    if s.len() > NAME_TOTAL_LENGTH_MAX {
        return Err(RepositoryError::TooLong(s.into()));
    }
    let components: Vec<&str> = path.split('/').collect();
    for (i, comp) in components.iter().enumerate() {
        if i + 1 == components.len() && comp.contains(':') {
            // `reference.IsNameOnly` is false: "must be repository--not reference".
            return Err(RepositoryError::Tag(s.into()));
        }
        if !is_path_component(comp) {
            return Err(RepositoryError::Component {
                repo: s.into(),
                component: (*comp).into(),
            });
        }
    }
    Ok(())
}

/// docker/reference `NameTotalLengthMax`.
const NAME_TOTAL_LENGTH_MAX: usize = 255;

/// A repository without '/': `ParseNamed` finds it not canonical (it is `docker.io/library/…`), and
/// `validateNamedRepository` then accepts it when `net.SplitHostPort`'s host (or the whole string)
/// is a DNS-1123 subdomain — lower case, labels not starting or ending with '-'. The port must be a
/// number here; the installer does not look at it offline, but the mirror could not be reached.
fn check_bare_host(s: &str) -> Result<(), RepositoryError> {
    let (h, port) = s.split_once(':').map_or((s, None), |(h, p)| (h, Some(p)));
    if !crate::net::is_dns_subdomain(h) || h.ends_with('.') {
        return Err(RepositoryError::Host {
            repo: s.into(),
            host: h.into(),
        });
    }
    if port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return Err(RepositoryError::Port(s.into()));
    }
    Ok(())
}

/// docker/reference `domainAndPort`: dot-separated components of `[a-zA-Z0-9]`, '-' only inside a
/// component, then an optional `:` and digits.
fn check_domain(repo: &str, domain: &str) -> Result<(), RepositoryError> {
    let (h, port) = domain
        .split_once(':')
        .map_or((domain, None), |(h, p)| (h, Some(p)));
    let component_ok = |c: &str| {
        !c.is_empty()
            && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !c.starts_with('-')
            && !c.ends_with('-')
    };
    if !h.split('.').all(component_ok) {
        return Err(RepositoryError::Host {
            repo: repo.into(),
            host: domain.into(),
        });
    }
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return Err(RepositoryError::Port(repo.into()));
    }
    Ok(())
}

/// docker/reference `pathComponent`: runs of `[a-z0-9]` joined by one separator — `.`, `_`, `__` or
/// any number of `-` — so a component neither starts nor ends with one, and `..` or `._` is none.
fn is_path_component(c: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let b = c.as_bytes();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
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
            .to_string()
            .contains("not valid JSON"));
        assert!(check_pull_secret(r#"{"x":1}"#)
            .unwrap_err()
            .to_string()
            .contains("no 'auths'"));
        assert!(check_pull_secret(r#"{"auths":{}}"#)
            .unwrap_err()
            .to_string()
            .contains("empty"));
        assert!(check_pull_secret(r#"{"auths":{"q.io":{"email":"a"}}}"#)
            .unwrap_err()
            .to_string()
            .contains("neither"));
    }

    #[test]
    fn ssh_keys() {
        assert_eq!(check_ssh_key(TEST_SSH_KEY, false).unwrap(), ["ssh-ed25519"]);
        assert!(check_ssh_key(TEST_SSH_KEY, true)
            .unwrap_err()
            .to_string()
            .contains("fips"));
        let swapped = TEST_SSH_KEY.replacen("ssh-ed25519", "ssh-rsa", 1);
        assert!(check_ssh_key(&swapped, false)
            .unwrap_err()
            .to_string()
            .contains("is a 'ssh-ed25519' key"));
        assert!(check_ssh_key("ssh-ed25519 !!!", false).is_err());
        assert!(check_ssh_key("hello world", false)
            .unwrap_err()
            .to_string()
            .contains("key type"));
        let two = format!("{TEST_SSH_KEY}\n{TEST_SSH_KEY}");
        assert_eq!(check_ssh_key(&two, false).unwrap().len(), 2);
        let second_bad = format!("{TEST_SSH_KEY}\nssh-rsa AAAA");
        assert!(check_ssh_key(&second_bad, false)
            .unwrap_err()
            .to_string()
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
            .to_string()
            .contains("no PEM block"));
        // Built from parts so the tree holds no literal private-key header.
        let key = concat!(
            "-----BEGIN ",
            "PRIVATE KEY-----\nAAAA\n-----END ",
            "PRIVATE KEY-----\n"
        );
        assert!(check_pem_bundle(key)
            .unwrap_err()
            .to_string()
            .contains("not a CERTIFICATE"));
        let garbled = "-----BEGIN CERTIFICATE-----\nMIIBBBBB\n-----END CERTIFICATE-----\n";
        assert!(check_pem_bundle(garbled)
            .unwrap_err()
            .to_string()
            .contains("not an x509"));
        let cut = TEST_CERT.replace("-----END CERTIFICATE-----", "");
        assert!(check_pem_bundle(&cut)
            .unwrap_err()
            .to_string()
            .contains("no '-----END"));
    }

    /// installer `validate.CABundle`: `pem.Decode` consumes one line end after a block's END line;
    /// anything left after the last block is an "invalid block".
    #[test]
    fn pem_bundles_refuse_what_follows_the_last_block() {
        let cert = TEST_CERT.trim_end();
        assert_eq!(
            check_pem_bundle(cert).unwrap(),
            1,
            "no final newline is fine"
        );
        assert_eq!(check_pem_bundle(&format!("{cert}\r\n")).unwrap(), 1);
        assert_eq!(check_pem_bundle(&format!("{cert}  \n")).unwrap(), 1);
        for (bad, what) in [
            (format!("{cert}\n\n"), "one blank line"),
            (format!("{cert}\n \n"), "a white-space line"),
            (format!("{cert}\n# end of bundle\n"), "trailing text"),
        ] {
            let e = check_pem_bundle(&bad).unwrap_err();
            assert!(
                matches!(e, PemError::TrailingText { block: 1 }),
                "{what}: {e:?}"
            );
        }
        let e = check_pem_bundle(&format!("{cert} junk\n")).unwrap_err();
        assert!(matches!(e, PemError::EndLineText { block: 1 }), "{e:?}");
    }

    #[test]
    fn normalised_bundles_pass_and_end_in_one_newline() {
        let cert = TEST_CERT.trim_end();
        for given in [
            format!("{cert}\n\n"),
            format!("{cert}\n \n\t\n"),
            format!("{cert}\r\n"),
            cert.to_string(),
            format!("# root\n{cert}\n\n{cert}\n\n\n"),
        ] {
            let n = normalize_pem_bundle(&given);
            assert!(n.ends_with("-----END CERTIFICATE-----\n"), "{n:?}");
            assert!(!n.ends_with("\n\n"));
            check_pem_bundle(&n).unwrap();
        }
        // Text after the last block is not white space: it stays, and is refused.
        let n = normalize_pem_bundle(&format!("{cert}\n# end\n\n"));
        assert!(check_pem_bundle(&n).is_err());
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
            .to_string()
            .contains("tag"));
        assert!(check_repository("quay.io/ocp@sha256:abc")
            .unwrap_err()
            .to_string()
            .contains("digest"));
        assert!(check_repository("https://quay.io/x").is_err());
        // validateNamedRepository: a path needs a registry host in front of it.
        assert!(matches!(
            check_repository("openshift/release"),
            Err(RepositoryError::NoRegistryHost { .. })
        ));
        assert!(check_repository("localhost/ocp").is_ok());
        assert!(check_repository("registry:5000/ocp").is_ok());
        assert!(check_repository("mirror").is_ok());
    }

    /// installer `validateNamedRepository` over the docker reference grammar (containers/image
    /// docker/reference regexp.go `pathComponent`, `domainAndPort`; `ParseNamed`'s fallback).
    #[test]
    fn repositories_follow_the_docker_reference_grammar() {
        for ok in [
            "quay.io/ocp/release",
            "quay.io/openshift-release-dev/ocp-v4.0-art-dev",
            "quay.io/a__b/c_d/e.f/g---h",
            "Mirror.Example.com:5000/ocp4",
            "mirror-1.lab/ocp",
            "10.0.0.5:5000/ocp",
            "mirror.lab:5000",
            "mirror.lab",
        ] {
            assert!(
                check_repository(ok).is_ok(),
                "{ok}: {:?}",
                check_repository(ok)
            );
        }
        for (bad, why) in [
            ("quay.io/-ocp/release", "component starts with -"),
            ("quay.io/ocp/release.", "component ends with ."),
            ("mirror.example.com/-ocp4", "component starts with -"),
            ("quay.io/_ocp/release", "leading _"),
            ("quay.io/ocp..x/release", "doubled ."),
            ("quay.io/ocp___x", "three _"),
            ("quay.io/ocp._x", "mixed separators"),
            ("quay.io/ocp/Release", "upper case in the path"),
            ("quay.io//ocp", "empty component"),
            ("quay.io/ocp/", "empty last component"),
            ("-quay.io/ocp", "host component starts with -"),
            ("quay-.io/ocp", "host component ends with -"),
            ("quay..io/ocp", "empty host component"),
            ("quay.io:/ocp", "empty port"),
            ("quay.io:50a/ocp", "port not digits"),
            (
                "[fd00::1]:5000/ocp",
                "IPv6 host (not in the grammar the installer vendors)",
            ),
            ("Mirror.Example.com", "bare host in upper case"),
            ("-mirror", "bare host starting with -"),
            ("mirror.lab:abc", "bare host with a port that is no number"),
        ] {
            assert!(check_repository(bad).is_err(), "{bad} ({why}) passed");
        }
        let long = format!("quay.io/{}", "a".repeat(250));
        assert!(matches!(
            check_repository(&long),
            Err(RepositoryError::TooLong(_))
        ));
    }

    #[test]
    fn errors_are_typed_and_keep_the_cause() {
        use std::error::Error;
        assert!(matches!(
            check_pull_secret("{not json"),
            Err(PullSecretError::NotJson(
                serde_json::error::Category::Syntax
            ))
        ));
        let second_bad = format!("{TEST_SSH_KEY}\nssh-rsa AAAA");
        let e = check_ssh_key(&second_bad, false).unwrap_err();
        assert!(matches!(e, SshKeyError::Line { line: 2, .. }), "{e:?}");
        assert!(e.source().is_some_and(|s| s.is::<SshLineError>()));
        let garbled = "-----BEGIN CERTIFICATE-----\nMIIBBBBB\n-----END CERTIFICATE-----\n";
        let e = check_pem_bundle(garbled).unwrap_err();
        assert!(matches!(e, PemError::NotX509 { block: 1, .. }), "{e:?}");
        assert!(e.source().is_some_and(|s| s.is::<DerError>()));
        assert!(matches!(
            check_repository("quay.io/ocp/release:4.16"),
            Err(RepositoryError::Tag(_))
        ));
    }
}
