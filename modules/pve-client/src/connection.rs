//! Connection options shared by every Proxmox module, named as in community.proxmox so playbooks
//! can switch modules without renaming anything.

use std::path::PathBuf;
use std::time::Duration;

use ansible_module::{Opt, Type};
use serde::Deserialize;

use crate::Error;

/// The connection options of both Proxmox modules; add them with `ArgSpec::with(connection_options())`.
pub fn connection_options() -> Vec<Opt> {
    vec![
        Opt::str("api_host").required().env(&["PROXMOX_HOST"]),
        Opt::int("api_port").default(8006).env(&["PROXMOX_PORT"]),
        Opt::str("api_user").env(&["PROXMOX_USER"]),
        Opt::str("api_password").no_log().env(&["PROXMOX_PASSWORD"]),
        Opt::str("api_token_id").env(&["PROXMOX_TOKEN_ID"]),
        Opt::str("api_token_secret")
            .no_log()
            .env(&["PROXMOX_TOKEN_SECRET"]),
        Opt::new("validate_certs", Type::Bool)
            .default(true)
            .env(&["PROXMOX_VALIDATE_CERTS"]),
        Opt::path("ca_path").env(&["PROXMOX_CA_PATH"]),
        Opt::int("api_timeout").default(30),
    ]
}

/// The typed form of [`connection_options`]; deserialise it from the module's params.
#[derive(Debug, Clone, Deserialize)]
pub struct ConnectionOptions {
    /// Host name or address; a full `https://host[:port]` (or `http://`, for a local test API) URL is
    /// accepted too, and its port wins over `api_port`.
    pub api_host: String,
    #[serde(default = "default_port")]
    pub api_port: u16,
    #[serde(default)]
    pub api_user: Option<String>,
    #[serde(default)]
    pub api_password: Option<String>,
    /// Token name (`ansible`) combined with `api_user`, or a full token id (`root@pam!ansible`).
    #[serde(default)]
    pub api_token_id: Option<String>,
    #[serde(default)]
    pub api_token_secret: Option<String>,
    #[serde(default = "yes")]
    pub validate_certs: bool,
    #[serde(default)]
    pub ca_path: Option<PathBuf>,
    /// Seconds per HTTP request (tasks have their own, per-operation timeouts).
    #[serde(default = "default_timeout")]
    pub api_timeout: u64,
}

fn default_port() -> u16 {
    8006
}
fn yes() -> bool {
    true
}
fn default_timeout() -> u64 {
    30
}

/// How the client proves who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// `PVEAPIToken=USER@REALM!TOKENID=SECRET`; stateless, no CSRF.
    Token { id: String, secret: String },
    /// Ticket cookie + CSRF header, renewed before it expires.
    Password { user: String, password: String },
}

/// A scheme-less `api_host`: the host (IPv6 in brackets) and the port it names, if any.
fn split_host_port(host: &str) -> Result<(String, Option<u16>), Error> {
    let bad_port = |p: &str| {
        Error::invalid(format!(
            "api_host '{host}': '{p}' is not a port (give host:PORT, or the port in api_port)"
        ))
    };
    let parse_port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| bad_port(p))
    };
    if let Some(rest) = host.strip_prefix('[') {
        // `[v6]` or `[v6]:port`.
        let (addr, tail) = rest.split_once(']').ok_or_else(|| {
            Error::invalid(format!(
                "api_host '{host}': unclosed '[' in an IPv6 address"
            ))
        })?;
        let port = match tail {
            "" => None,
            t => Some(parse_port(t.strip_prefix(':').ok_or_else(|| bad_port(t))?)?),
        };
        return Ok((format!("[{addr}]"), port));
    }
    match host.split_once(':') {
        // More than one colon: a bare IPv6 address, which needs brackets in a URL.
        Some((_, rest)) if rest.contains(':') => Ok((format!("[{host}]"), None)),
        Some((h, p)) if !h.is_empty() => Ok((h.to_string(), Some(parse_port(p)?))),
        Some(_) => Err(Error::invalid(format!(
            "api_host '{host}' has no host name"
        ))),
        None => Ok((host.to_string(), None)),
    }
}

/// What a module says when it does not check the Proxmox server's certificate (as the Vault and
/// Kubernetes modules say it of theirs).
pub const INSECURE_WARNING: &str = "validate_certs is false (or PROXMOX_VALIDATE_CERTS=false): the Proxmox API \
     certificate is not verified, so anyone between this host and Proxmox can read the credentials and \
     answer in its place";

/// The module's client: connected, its session ticket masked in the module's output, and a warning when
/// the server's certificate is not checked. Every Proxmox module connects through this.
pub fn connect_module(
    m: &mut ansible_module::Module,
    conn: &ConnectionOptions,
) -> Result<crate::Client, Error> {
    let client = crate::Client::connect(conn)?;
    if let Some(t) = client.session_ticket() {
        m.add_secret(t);
    }
    if let Some(w) = conn.insecure_warning() {
        m.warn(w);
    }
    Ok(client)
}

impl ConnectionOptions {
    /// The warning for certificate checking turned off, if it is (pure).
    pub fn insecure_warning(&self) -> Option<&'static str> {
        (!self.validate_certs).then_some(INSECURE_WARNING)
    }

    /// Options for a host with token auth and defaults elsewhere (tests, tools).
    pub fn new(api_host: impl Into<String>) -> Self {
        ConnectionOptions {
            api_host: api_host.into(),
            api_port: 8006,
            api_user: None,
            api_password: None,
            api_token_id: None,
            api_token_secret: None,
            validate_certs: true,
            ca_path: None,
            api_timeout: 30,
        }
    }

    /// `https://host:port` (no trailing slash). `api_host` may be `host`, `host:port`, an IPv6
    /// address (`fd00::5`, `[fd00::5]`, `[fd00::5]:8006`) or an `https://` URL; a port given in
    /// `api_host` wins over `api_port`.
    pub fn base_url(&self) -> Result<String, Error> {
        let host = self.api_host.trim().trim_end_matches('/');
        if host.is_empty() {
            return Err(Error::invalid(
                "api_host is empty: give the Proxmox host (or set PROXMOX_HOST)",
            ));
        }
        if let Some((scheme, rest)) = host.split_once("://") {
            if scheme != "https" && scheme != "http" {
                return Err(Error::invalid(format!(
                    "api_host '{host}': only https:// (or http://) URLs are supported"
                )));
            }
            let authority = rest.split('/').next().unwrap_or(rest);
            let has_port = authority
                .rsplit_once(':')
                .is_some_and(|(_, p)| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
                && !authority.ends_with(']');
            return Ok(if has_port {
                format!("{scheme}://{authority}")
            } else {
                format!("{scheme}://{authority}:{}", self.api_port)
            });
        }
        let (h, port) = split_host_port(host)?;
        Ok(format!("https://{h}:{}", port.unwrap_or(self.api_port)))
    }

    /// Pick the authentication: a token when one is configured (preferred), else user + password.
    pub fn auth(&self) -> Result<Auth, Error> {
        let user = self
            .api_user
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let token_id = self
            .api_token_id
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let secret = self.api_token_secret.as_deref().filter(|s| !s.is_empty());
        match (token_id, secret) {
            (Some(id), Some(secret)) => {
                let id = if id.contains('!') {
                    id.to_string()
                } else {
                    let user = user.ok_or_else(|| {
                        Error::invalid(format!(
                            "api_token_id '{id}' is a token name only: set api_user (user@realm) too, or give the full id 'user@realm!{id}'"
                        ))
                    })?;
                    format!("{user}!{id}")
                };
                if !id.split('!').next().unwrap_or("").contains('@') {
                    return Err(Error::invalid(format!(
                        "API token id '{id}' must look like user@realm!tokenname"
                    )));
                }
                Ok(Auth::Token {
                    id,
                    secret: secret.to_string(),
                })
            }
            (Some(_), None) => Err(Error::invalid(
                "api_token_id is set but api_token_secret is not (or set PROXMOX_TOKEN_SECRET)",
            )),
            (None, Some(_)) => Err(Error::invalid(
                "api_token_secret is set but api_token_id is not (or set PROXMOX_TOKEN_ID)",
            )),
            (None, None) => match (user, self.api_password.as_deref()) {
                (Some(u), Some(p)) if !p.is_empty() => {
                    if !u.contains('@') {
                        return Err(Error::invalid(format!(
                            "api_user '{u}' needs a realm, e.g. '{u}@pam' or '{u}@pve'"
                        )));
                    }
                    Ok(Auth::Password {
                        user: u.to_string(),
                        password: p.to_string(),
                    })
                }
                _ => Err(Error::invalid(
                    "no Proxmox credentials: give api_token_id + api_token_secret (preferred) or api_user + api_password (or the PROXMOX_* environment variables)",
                )),
            },
        }
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.api_timeout.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ConnectionOptions {
        ConnectionOptions::new("pve.example.com")
    }

    #[test]
    fn base_urls() {
        assert_eq!(opts().base_url().unwrap(), "https://pve.example.com:8006");
        let mut o = opts();
        o.api_host = "http://127.0.0.1:4321/".into();
        assert_eq!(o.base_url().unwrap(), "http://127.0.0.1:4321");
        o.api_host = "https://pve1".into();
        o.api_port = 443;
        assert_eq!(o.base_url().unwrap(), "https://pve1:443");
        o.api_host = "fd00::5".into();
        assert_eq!(o.base_url().unwrap(), "https://[fd00::5]:443");
        o.api_host = "ftp://x".into();
        assert!(o.base_url().is_err());
    }

    #[test]
    fn host_with_port_and_no_scheme() {
        let mut o = opts();
        o.api_port = 443;
        o.api_host = "pve1.example.com:8006".into();
        assert_eq!(o.base_url().unwrap(), "https://pve1.example.com:8006");
        o.api_host = "10.0.0.5:8443".into();
        assert_eq!(o.base_url().unwrap(), "https://10.0.0.5:8443");
        o.api_host = "[fd00::5]:8006".into();
        assert_eq!(o.base_url().unwrap(), "https://[fd00::5]:8006");
        o.api_host = "[fd00::5]".into();
        assert_eq!(o.base_url().unwrap(), "https://[fd00::5]:443");
        for bad in [
            "pve1:http",
            "pve1:",
            "pve1:0",
            "pve1:99999",
            "[fd00::5]x",
            ":8006",
        ] {
            o.api_host = bad.into();
            let e = o.base_url().unwrap_err().to_string();
            assert!(e.contains("api_host"), "{bad}: {e}");
        }
    }

    #[test]
    fn token_preferred_and_composed_from_user() {
        let mut o = opts();
        o.api_user = Some("ansible@pve".into());
        o.api_password = Some("pw".into());
        o.api_token_id = Some("ci".into());
        o.api_token_secret = Some("uuid".into());
        assert_eq!(
            o.auth().unwrap(),
            Auth::Token {
                id: "ansible@pve!ci".into(),
                secret: "uuid".into()
            }
        );
        o.api_token_id = Some("root@pam!full".into());
        assert!(matches!(o.auth().unwrap(), Auth::Token { id, .. } if id == "root@pam!full"));
    }

    #[test]
    fn missing_pieces_are_named() {
        let mut o = opts();
        let e = o.auth().unwrap_err().to_string();
        assert!(e.contains("no Proxmox credentials"), "{e}");
        o.api_token_id = Some("ci".into());
        let e = o.auth().unwrap_err().to_string();
        assert!(e.contains("api_token_secret"), "{e}");
        o.api_token_secret = Some("s".into());
        let e = o.auth().unwrap_err().to_string();
        assert!(e.contains("set api_user"), "{e}");
        let mut o = opts();
        o.api_user = Some("root".into());
        o.api_password = Some("x".into());
        assert!(o.auth().unwrap_err().to_string().contains("root@pam"));
    }
}
