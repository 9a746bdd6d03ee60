//! Logging in: every method ends with a client token on the [`Vault`].

use std::path::{Path, PathBuf};

use proxshift_http::reqwest::Method;
use serde_json::{json, Value};

use crate::{clean_path, Error, Vault};

/// An auth method with its credentials. `mount` is the auth mount path (`approle`, or a custom one).
#[derive(Clone)]
pub enum Auth {
    Token {
        token: String,
    },
    AppRole {
        mount: String,
        role_id: String,
        secret_id: Option<String>,
    },
    /// Kubernetes service-account JWT, verified by Vault with a TokenReview.
    Kubernetes {
        mount: String,
        role: String,
        jwt: String,
    },
    Jwt {
        mount: String,
        role: Option<String>,
        jwt: String,
    },
    Userpass {
        mount: String,
        username: String,
        password: String,
    },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The method and mount only: every other field is a credential or close to one.
        write!(
            f,
            "Auth::{}({})",
            self.method(),
            self.mount().unwrap_or("-")
        )
    }
}

impl Auth {
    pub fn method(&self) -> &'static str {
        match self {
            Auth::Token { .. } => "token",
            Auth::AppRole { .. } => "approle",
            Auth::Kubernetes { .. } => "kubernetes",
            Auth::Jwt { .. } => "jwt",
            Auth::Userpass { .. } => "userpass",
        }
    }

    pub fn mount(&self) -> Option<&str> {
        match self {
            Auth::Token { .. } => None,
            Auth::AppRole { mount, .. }
            | Auth::Kubernetes { mount, .. }
            | Auth::Jwt { mount, .. }
            | Auth::Userpass { mount, .. } => Some(mount),
        }
    }

    /// The login call: API path and body. `None` for a token (nothing to call).
    fn request(&self) -> Option<(String, Value)> {
        let at = |mount: &str, tail: &str| format!("auth/{}/{tail}", clean_path(mount));
        match self {
            Auth::Token { .. } => None,
            Auth::AppRole {
                mount,
                role_id,
                secret_id,
            } => {
                let mut body = json!({"role_id": role_id});
                if let Some(s) = secret_id {
                    body["secret_id"] = json!(s);
                }
                Some((at(mount, "login"), body))
            }
            Auth::Kubernetes { mount, role, jwt } => {
                Some((at(mount, "login"), json!({"role": role, "jwt": jwt})))
            }
            Auth::Jwt { mount, role, jwt } => {
                let mut body = json!({"jwt": jwt});
                if let Some(r) = role {
                    body["role"] = json!(r);
                }
                Some((at(mount, "login"), body))
            }
            Auth::Userpass {
                mount,
                username,
                password,
            } => {
                // The username is part of the path; keep it one segment.
                Some((
                    at(mount, &format!("login/{}", username.replace('/', "%2F"))),
                    json!({"password": password}),
                ))
            }
        }
    }
}

/// What a login produced. `token` is a credential: callers must treat it as no_log.
#[derive(Clone)]
pub struct Login {
    pub token: String,
    pub accessor: Option<String>,
    pub policies: Vec<String>,
    pub lease_duration: u64,
    pub renewable: bool,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("policies", &self.policies)
            .field("lease_duration", &self.lease_duration)
            .finish()
    }
}

impl Login {
    fn from_auth(auth: &Value) -> Option<Login> {
        let token = auth["client_token"]
            .as_str()
            .filter(|t| !t.is_empty())?
            .to_string();
        let policies = crate::strings(&auth["policies"]);
        Some(Login {
            token,
            accessor: auth["accessor"].as_str().map(str::to_string),
            policies,
            lease_duration: auth["lease_duration"].as_u64().unwrap_or(0),
            renewable: auth["renewable"].as_bool().unwrap_or(false),
        })
    }
}

impl Vault {
    /// Log in with `auth` and use the resulting token from now on. A token is taken as given (call
    /// [`Vault::lookup_self`] to check it).
    pub fn login(&mut self, auth: &Auth) -> Result<Login, Error> {
        let Some((path, body)) = auth.request() else {
            let Auth::Token { token } = auth else {
                unreachable!("only a token needs no login call")
            };
            self.set_token(token.clone());
            return Ok(Login {
                token: token.clone(),
                accessor: None,
                policies: vec![],
                lease_duration: 0,
                renewable: false,
            });
        };
        // Login calls are unauthenticated; a stale token header could only confuse the server.
        self.token = None;
        let (status, json) = self.call(Method::POST, &path, Some(&body))?;
        if status >= 400 {
            let base = crate::api_error(&Method::POST, &path, status, &json);
            let Error::Api { op, status, errors } = base else {
                return Err(base);
            };
            let op = format!("{} login ({op})", auth.method());
            return Err(Error::Api { op, status, errors });
        }
        let login = Login::from_auth(&json["auth"]).ok_or_else(|| Error::Decode {
            op: format!("POST {path}"),
            detail: "the login answer has no auth.client_token".into(),
        })?;
        self.set_token(login.token.clone());
        Ok(login)
    }
}

/// The token file's name when `token_file` is not given: `~/.vault-token` is where the `vault`/`bao`
/// CLI keeps the token of `vault login`, and community.hashi_vault's `token_file` default.
pub const DEFAULT_TOKEN_FILE: &str = ".vault-token";

/// The token file that `token_path` and `token_file` name (pure; `is_dir` says whether a path is a
/// directory). community.hashi_vault's form: `token_path` is a directory (`$HOME` when not given)
/// holding `token_file` (default `.vault-token`); ProxShift's earlier form, kept: `token_path` is the
/// file itself — when it is not a directory and `token_file` is not given. An empty `token_file`
/// counts as not given. `None` when nothing names a file (no `token_path` and no home).
pub fn token_file_location(
    token_path: Option<&Path>,
    token_file: Option<&str>,
    home: Option<&Path>,
    is_dir: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let given = token_file.filter(|f| !f.is_empty());
    let file = given.unwrap_or(DEFAULT_TOKEN_FILE);
    match token_path.filter(|p| !p.as_os_str().is_empty()) {
        None => home
            .filter(|h| !h.as_os_str().is_empty())
            .map(|h| h.join(file)),
        Some(p) if given.is_some() || is_dir(p) => Some(p.join(file)),
        Some(p) => Some(p.to_path_buf()),
    }
}

/// The token in a token file (surrounding whitespace removed). `Ok(None)` when the file does not exist.
pub fn read_token_file(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(t) => {
            let t = t.trim().to_string();
            if t.is_empty() {
                Err(Error::Config(format!(
                    "token file {} is empty",
                    path.display()
                )))
            } else {
                Ok(Some(t))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Config(format!(
            "cannot read token file {}: {e}",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_requests() {
        let a = Auth::AppRole {
            mount: "/approle-ci/".into(),
            role_id: "r".into(),
            secret_id: Some("s".into()),
        };
        assert_eq!(
            a.request().unwrap(),
            (
                "auth/approle-ci/login".into(),
                json!({"role_id": "r", "secret_id": "s"})
            )
        );
        let k = Auth::Kubernetes {
            mount: "kubernetes".into(),
            role: "app".into(),
            jwt: "j".into(),
        };
        assert_eq!(
            k.request().unwrap(),
            (
                "auth/kubernetes/login".into(),
                json!({"role": "app", "jwt": "j"})
            )
        );
        let j = Auth::Jwt {
            mount: "jwt".into(),
            role: None,
            jwt: "j".into(),
        };
        assert_eq!(
            j.request().unwrap(),
            ("auth/jwt/login".into(), json!({"jwt": "j"}))
        );
        let u = Auth::Userpass {
            mount: "userpass".into(),
            username: "ops".into(),
            password: "pw".into(),
        };
        assert_eq!(
            u.request().unwrap(),
            ("auth/userpass/login/ops".into(), json!({"password": "pw"}))
        );
        assert!(Auth::Token { token: "t".into() }.request().is_none());
    }

    #[test]
    fn debug_hides_credentials() {
        let u = Auth::Userpass {
            mount: "userpass".into(),
            username: "ops".into(),
            password: "canary-pw".into(),
        };
        assert_eq!(format!("{u:?}"), "Auth::userpass(userpass)");
        let l = Login {
            token: "canary-tok".into(),
            accessor: None,
            policies: vec!["p".into()],
            lease_duration: 1,
            renewable: true,
        };
        assert!(!format!("{l:?}").contains("canary"));
    }

    #[test]
    fn token_file_location_takes_both_forms() {
        let dirs = |p: &Path| p == Path::new("/tokens") || p == Path::new("/home/u");
        let home = Some(Path::new("/home/u"));
        let at = |path: Option<&str>, file: Option<&str>| {
            token_file_location(path.map(Path::new), file, home, dirs)
        };
        // Nothing given: ~/.vault-token, as the CLI and community.hashi_vault.
        assert_eq!(at(None, None), Some("/home/u/.vault-token".into()));
        assert_eq!(at(None, Some("")), Some("/home/u/.vault-token".into()));
        // community.hashi_vault: token_path a directory, token_file the name in it.
        assert_eq!(
            at(Some("/tokens"), None),
            Some("/tokens/.vault-token".into())
        );
        assert_eq!(at(Some("/tokens"), Some("ci")), Some("/tokens/ci".into()));
        assert_eq!(at(None, Some("ci")), Some("/home/u/ci".into()));
        // Named explicitly, token_file is always joined (community.hashi_vault's rule), even to a path
        // that is not a directory (no such file: no token).
        assert_eq!(at(Some("/nowhere"), Some("ci")), Some("/nowhere/ci".into()));
        // ProxShift's earlier form: token_path is the file.
        assert_eq!(at(Some("/etc/tok"), None), Some("/etc/tok".into()));
        assert_eq!(at(Some(""), None), Some("/home/u/.vault-token".into()));
        assert_eq!(token_file_location(None, None, None, dirs), None);
        assert_eq!(
            token_file_location(None, None, Some(Path::new("")), dirs),
            None
        );
    }

    #[test]
    fn token_file() {
        let dir = std::env::temp_dir().join(format!("vault-client-tokfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("tok");
        assert_eq!(read_token_file(&f).unwrap(), None);
        std::fs::write(&f, "s.abc\n").unwrap();
        assert_eq!(read_token_file(&f).unwrap().as_deref(), Some("s.abc"));
        std::fs::write(&f, "  \n").unwrap();
        assert!(read_token_file(&f)
            .unwrap_err()
            .to_string()
            .contains("is empty"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
