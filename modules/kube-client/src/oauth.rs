//! OpenShift OAuth: username + password → bearer token with the challenging client (what `oc login`
//! does), token revocation, and the pure parts (fragment parsing, token object names, expiry times).

use base64::Engine;
use proxshift_http::{ClientOptions, Tls};
use serde_json::Value;

use crate::error::{KubeError, LoginError};
use crate::kubeconfig::Connection;

pub const CHALLENGING_CLIENT: &str = "openshift-challenging-client";

/// A token obtained by logging in.
#[derive(Clone)]
pub struct Token {
    pub access_token: String,
    pub expires_in: Option<u64>,
    pub scope: Option<String>,
}

/// Percent-decoding for `application/x-www-form-urlencoded` values.
fn form_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 3 <= bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn pairs(s: &str) -> Vec<(String, String)> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (form_decode(k), form_decode(v)),
            None => (form_decode(p), String::new()),
        })
        .collect()
}

/// Why the authorize endpoint's redirect carries no token.
#[derive(Debug, thiserror::Error)]
pub enum OAuthRedirectError {
    #[error("the OAuth server refused the login: {error}{}", if description.is_empty() { String::new() } else { format!(": {description}") })]
    Refused { error: String, description: String },
    #[error("the OAuth server redirected without an access_token in the URL fragment")]
    NoAccessToken,
}

/// Read the token (or the error) from the `Location` of the authorize endpoint's 302.
pub fn token_from_location(location: &str) -> Result<Token, OAuthRedirectError> {
    let (before, fragment) = match location.split_once('#') {
        Some((b, f)) => (b, f),
        None => (location, ""),
    };
    let query = before.split_once('?').map(|(_, q)| q).unwrap_or("");
    let all: Vec<(String, String)> = pairs(fragment).into_iter().chain(pairs(query)).collect();
    let get = |k: &str| all.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if let Some(err) = get("error") {
        return Err(OAuthRedirectError::Refused {
            error: err,
            description: get("error_description").unwrap_or_default(),
        });
    }
    match get("access_token").filter(|t| !t.is_empty()) {
        Some(t) => Ok(Token {
            access_token: t,
            expires_in: get("expires_in").and_then(|e| e.parse().ok()),
            scope: get("scope"),
        }),
        None => Err(OAuthRedirectError::NoAccessToken),
    }
}

/// The name of the `OAuthAccessToken` object behind a `sha256~` token: `sha256~` + unpadded
/// URL-safe base64 of SHA-256 over the token without its prefix.
pub fn token_object_name(token: &str) -> String {
    let raw = token.strip_prefix("sha256~").unwrap_or(token);
    let digest = ring::digest::digest(&ring::digest::SHA256, raw.as_bytes());
    format!(
        "sha256~{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
    )
}

/// `secs` since the Unix epoch as RFC 3339 UTC (`2026-12-02T13:20:38Z`).
pub fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .to_string()
}

/// The trust for the OAuth server: the API's, plus `ingress_ca` (PEM, any number of certificates).
///
/// The OAuth server is not the API: it runs behind the `*.apps` ingress (`oauth-openshift.apps.…`) and
/// presents the ingress certificate, signed by the ingress operator's CA unless a custom one is set.
pub fn oauth_tls(api: &Tls, ingress_ca: Option<&[u8]>) -> Tls {
    let mut tls = api.clone();
    // The login sends no client certificate: the OAuth server is asked with the password only.
    tls.identity_pem = None;
    if let Some(extra) = ingress_ca {
        let mut pem = tls.ca_pem.take().unwrap_or_default();
        if !pem.is_empty() && !pem.ends_with(b"\n") {
            pem.push(b'\n');
        }
        pem.extend_from_slice(extra);
        tls.ca_pem = Some(pem);
    }
    tls
}

/// Log in with username and password against the cluster behind `api`: the discovery document comes
/// from the API (checked with `api.tls`), the authorize endpoint it names is asked with `oauth` (see
/// [`oauth_tls`]).
pub fn login(
    api: &Connection,
    oauth: &Tls,
    username: &str,
    password: &str,
) -> Result<Token, KubeError> {
    let client_for = |tls: &Tls| {
        proxshift_http::client(&ClientOptions {
            tls: tls.clone(),
            follow_redirects: false,
            ..Default::default()
        })
    };
    let http = client_for(&api.tls)?;
    let discovery_url = format!("{}/.well-known/oauth-authorization-server", api.server);
    let transport = |what: &str, source: proxshift_http::reqwest::Error| KubeError::Transport {
        request: what.to_string(),
        source,
    };
    let resp = http
        .get(&discovery_url)
        .send()
        .map_err(|e| transport(&format!("GET {discovery_url}"), e))?;
    let status = resp.status().as_u16();
    let body = resp
        .bytes()
        .map_err(|e| transport("reading the OAuth discovery document", e))?;
    if status != 200 {
        let mut e = KubeError::from_response(
            "GET",
            "/.well-known/oauth-authorization-server",
            status,
            &body,
        );
        // 404 (or 403 for anonymous on plain Kubernetes): no OpenShift OAuth behind this API.
        if status == 404 || status == 403 {
            e = LoginError::NoOAuth {
                source: Box::new(e),
            }
            .into();
        }
        return Err(e);
    }
    let meta: Value = serde_json::from_slice(&body).map_err(LoginError::DiscoveryNotJson)?;
    let authorize = meta
        .get("authorization_endpoint")
        .and_then(Value::as_str)
        .ok_or(LoginError::NoAuthorizeEndpoint)?;
    let url = format!("{authorize}?client_id={CHALLENGING_CLIENT}&response_type=token");
    let http = client_for(oauth)?;
    let unreachable = |source| LoginError::OAuthServer {
        authorize: authorize.to_string(),
        source,
    };
    // First without credentials, as oc does: the server must offer a Basic challenge.
    let first = http
        .get(&url)
        .header("X-CSRF-Token", "1")
        .send()
        .map_err(unreachable)?;
    let offers_basic = first.headers().get_all("WWW-Authenticate").iter().any(|h| {
        h.to_str()
            .unwrap_or_default()
            .to_ascii_lowercase()
            .starts_with("basic")
    });
    let status = first.status().as_u16();
    if status == 302 {
        // Already authenticated (e.g. by a client certificate); take what it gives.
        return location_token(&first);
    }
    if status != 401 || !offers_basic {
        return Err(LoginError::NoBasicChallenge {
            authorize: authorize.to_string(),
            status,
        }
        .into());
    }
    let resp = http
        .get(&url)
        .header("X-CSRF-Token", "1")
        .basic_auth(username, Some(password))
        .send()
        .map_err(unreachable)?;
    match resp.status().as_u16() {
        302 | 303 => location_token(&resp),
        401 => Err(LoginError::WrongPassword {
            username: username.to_string(),
        }
        .into()),
        s => {
            let body = resp.bytes().unwrap_or_default();
            Err(KubeError::from_response(
                "GET",
                "/oauth/authorize",
                s,
                &body,
            ))
        }
    }
}

impl std::fmt::Debug for Token {
    // Never print the token itself.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .finish()
    }
}

fn location_token(resp: &proxshift_http::reqwest::blocking::Response) -> Result<Token, KubeError> {
    let loc = resp
        .headers()
        .get("Location")
        .and_then(|l| l.to_str().ok())
        .ok_or(LoginError::NoLocation)?;
    Ok(token_from_location(loc).map_err(LoginError::from)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_read_from_the_fragment() {
        let t = token_from_location("https://oauth/oauth/token/implicit#access_token=sha256~abc_DEF-1&expires_in=86400&scope=user%3Afull&token_type=Bearer").unwrap();
        assert_eq!(t.access_token, "sha256~abc_DEF-1");
        assert_eq!(t.expires_in, Some(86400));
        assert_eq!(t.scope.as_deref(), Some("user:full"));
    }

    #[test]
    fn errors_and_missing_tokens() {
        let e = token_from_location(
            "https://oauth/x?error=access_denied&error_description=scope+not+allowed",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("access_denied: scope not allowed"), "{e}");
        assert!(token_from_location("https://oauth/x#token_type=Bearer")
            .unwrap_err()
            .to_string()
            .contains("without an access_token"));
    }

    #[test]
    fn object_name_matches_openshift() {
        // sha256("abc") = ba7816bf…; URL-safe base64 without padding.
        assert_eq!(
            token_object_name("sha256~abc"),
            "sha256~ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0"
        );
        assert_eq!(token_object_name("abc"), token_object_name("sha256~abc"));
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_217_638), "2026-12-02T13:20:38Z");
    }

    #[test]
    fn oauth_trust_adds_the_ingress_ca_and_drops_the_client_certificate() {
        let api = Tls {
            validate_certs: true,
            ca_path: Some("/etc/api-ca.pem".into()),
            ca_pem: Some(b"API-CA".to_vec()),
            identity_pem: Some(b"CERT+KEY".to_vec()),
        };
        let t = oauth_tls(&api, Some(b"INGRESS-CA\n"));
        assert_eq!(t.ca_pem.as_deref(), Some(&b"API-CA\nINGRESS-CA\n"[..]));
        assert_eq!(t.ca_path, api.ca_path);
        assert!(t.validate_certs && t.identity_pem.is_none());
        let t = oauth_tls(&Tls::verified(), Some(b"INGRESS-CA"));
        assert_eq!(t.ca_pem.as_deref(), Some(&b"INGRESS-CA"[..]));
        assert_eq!(oauth_tls(&api, None).ca_pem, api.ca_pem);
    }

    #[test]
    fn form_decoding() {
        assert_eq!(form_decode("a%3Ab+c%zz%4"), "a:b c%zz%4");
    }
}
