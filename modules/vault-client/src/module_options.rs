//! The Vault connection and auth options of the collection's modules (`hashicorp_vault`,
//! `hashicorp_vault_info`) and the `proxshift.hashi_vault.kv` lookup, with their environment
//! fallbacks (`VAULT_ADDR`, `VAULT_TOKEN`, `VAULT_NAMESPACE`, `VAULT_CACERT`, `VAULT_SKIP_VERIFY`,
//! the token file `token_path`/`token_file` name (`~/.vault-token` by default), and community.hashi_vault's `ANSIBLE_HASHI_VAULT_*` names, which come first), and
//! the login they describe. An empty variable counts as unset (`ansible_module`'s rule): AWX renders an
//! optional credential field it was not given as `""`. One implementation, behind the `module-options`
//! feature so that the client itself does not depend on the module protocol.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{Auth, Backoff, Config, Error as VaultError, KvVersion, Tls, Vault};
use ansible_module::{Failure, Module, Opt};
use serde::Deserialize;

const SA_TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

pub fn connection_options() -> Vec<Opt> {
    vec![
        Opt::str("url")
            .required()
            .env(&["ANSIBLE_HASHI_VAULT_ADDR", "VAULT_ADDR"]),
        Opt::str("namespace").env(&["ANSIBLE_HASHI_VAULT_NAMESPACE", "VAULT_NAMESPACE"]),
        Opt::path("ca_cert")
            .aliases(&["cacert"])
            .env(&["ANSIBLE_HASHI_VAULT_CA_CERT", "VAULT_CACERT"]),
        Opt::bool("validate_certs"),
        Opt::int("timeout")
            .default(30)
            .env(&["ANSIBLE_HASHI_VAULT_TIMEOUT"]),
        Opt::int("retries")
            .default(3)
            .env(&["ANSIBLE_HASHI_VAULT_RETRIES"]),
        Opt::str("auth_method")
            .choices(&["token", "approle", "kubernetes", "jwt", "userpass"])
            .default("token")
            .env(&["ANSIBLE_HASHI_VAULT_AUTH_METHOD"]),
        Opt::str("mount_point").env(&["ANSIBLE_HASHI_VAULT_MOUNT_POINT"]),
        Opt::str("token")
            .no_log()
            .env(&["ANSIBLE_HASHI_VAULT_TOKEN", "VAULT_TOKEN"]),
        Opt::path("token_path").env(&["ANSIBLE_HASHI_VAULT_TOKEN_PATH"]),
        Opt::str("token_file").env(&["ANSIBLE_HASHI_VAULT_TOKEN_FILE"]),
        Opt::bool("token_validate")
            .default(false)
            .env(&["ANSIBLE_HASHI_VAULT_TOKEN_VALIDATE"]),
        Opt::str("role_id").env(&["ANSIBLE_HASHI_VAULT_ROLE_ID"]),
        Opt::str("secret_id")
            .no_log()
            .env(&["ANSIBLE_HASHI_VAULT_SECRET_ID"]),
        Opt::str("role").aliases(&["role_name"]),
        Opt::str("jwt").no_log().env(&["ANSIBLE_HASHI_VAULT_JWT"]),
        Opt::path("service_account_token_path").default(SA_TOKEN_PATH),
        Opt::str("username").env(&["ANSIBLE_HASHI_VAULT_USERNAME"]),
        Opt::str("password")
            .no_log()
            .env(&["ANSIBLE_HASHI_VAULT_PASSWORD"]),
    ]
}

/// The typed form of [`connection_options`] (`#[serde(flatten)]` it into a module's options).
#[derive(Debug, Deserialize)]
pub struct ConnectionOptions {
    url: String,
    namespace: Option<String>,
    ca_cert: Option<String>,
    validate_certs: Option<bool>,
    timeout: i64,
    retries: i64,
    auth_method: String,
    mount_point: Option<String>,
    token: Option<String>,
    token_path: Option<String>,
    token_file: Option<String>,
    token_validate: bool,
    role_id: Option<String>,
    secret_id: Option<String>,
    role: Option<String>,
    jwt: Option<String>,
    service_account_token_path: String,
    username: Option<String>,
    password: Option<String>,
}

/// `VAULT_SKIP_VERIFY` says "skip", so it inverts; anything but a false-ish value means skip.
fn skip_verify_env() -> bool {
    std::env::var("VAULT_SKIP_VERIFY").is_ok_and(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "" | "0" | "false" | "no" | "off"
        )
    })
}

pub fn fail(e: VaultError) -> Failure {
    Failure::new(e.to_string())
}

fn read_file_secret(path: &str, what: &str) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::new(format!("cannot read {what} {path}: {e}")))?;
    let t = text.trim().to_string();
    if t.is_empty() {
        return Err(Failure::new(format!("{what} {path} is empty")));
    }
    Ok(t)
}

impl ConnectionOptions {
    /// As resolved by a controller-side plugin (the `kv` lookup): `validate_certs` not given means
    /// `true`, whatever `VAULT_SKIP_VERIFY` says here, since the plugin resolved that variable
    /// already (see `ansible_module::run_plugin`).
    pub fn resolved_by_plugin(mut self) -> Self {
        self.validate_certs.get_or_insert(true);
        self
    }

    /// Log in as configured; every credential learnt on the way is masked in the result.
    pub fn connect(&self, m: &mut Module) -> Result<Vault, Failure> {
        if self.timeout <= 0 {
            return Err("timeout must be a positive number of seconds".into());
        }
        if self.retries < 0 {
            return Err("retries must be 0 or more".into());
        }
        if crate::cleartext_to_remote(&self.url) {
            m.warn(format!(
                "url {} is plain http to a host other than this one: the token and every secret cross the network in clear text; use https",
                self.url.trim()
            ));
        }
        let validate = self.validate_certs.unwrap_or(!skip_verify_env());
        if !validate {
            m.warn("validate_certs is false (or VAULT_SKIP_VERIFY is set): the Vault server's certificate is not checked");
        }
        let cfg = Config {
            url: self.url.clone(),
            namespace: self.namespace.clone(),
            tls: Tls {
                validate_certs: validate,
                ca_path: self.ca_cert.as_ref().map(PathBuf::from),
                ..Default::default()
            },
            timeout: Duration::from_secs(self.timeout as u64),
            backoff: Backoff {
                attempts: self.retries as u32 + 1,
                ..Default::default()
            },
        };
        let mut vault = Vault::new(&cfg).map_err(fail)?;
        let auth = self.auth()?;
        // Credentials that did not come through a no_log option (token file, service-account token).
        match &auth {
            Auth::Token { token } => m.add_secret(token.clone()),
            Auth::Kubernetes { jwt, .. } => m.add_secret(jwt.clone()),
            _ => {}
        }
        let login = vault.login(&auth).map_err(fail)?;
        m.add_secret(login.token.clone());
        if matches!(auth, Auth::Token { .. }) && self.token_validate {
            vault
                .lookup_self()
                .map_err(|e| Failure::new(format!("token validation failed: {e}")))?;
        }
        Ok(vault)
    }

    fn token(&self) -> Result<String, Failure> {
        if let Some(t) = self.token.as_ref().filter(|t| !t.is_empty()) {
            return Ok(t.clone());
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let file = crate::token_file_location(
            self.token_path.as_deref().map(Path::new),
            self.token_file.as_deref(),
            home.as_deref(),
            Path::is_dir,
        );
        let found = match &file {
            Some(f) => crate::read_token_file(f).map_err(fail)?,
            None => None,
        };
        found.ok_or_else(|| {
            let place = match &file {
                Some(f) => format!("write one to {}", f.display()),
                None => format!(
                    "write one to a file named by token_path (a directory, with token_file, default {})",
                    crate::DEFAULT_TOKEN_FILE
                ),
            };
            Failure::new(format!(
                "auth_method is token but no token was found: set token, the VAULT_TOKEN environment variable, \
                 or {place}"
            ))
        })
    }

    fn auth(&self) -> Result<Auth, Failure> {
        let mount = |default: &str| {
            self.mount_point
                .clone()
                .unwrap_or_else(|| default.to_string())
        };
        let given = |v: &Option<String>, name: &str| {
            v.clone().ok_or_else(|| {
                Failure::new(format!(
                    "auth_method is {} but {name} is missing",
                    self.auth_method
                ))
            })
        };
        Ok(match self.auth_method.as_str() {
            "token" => Auth::Token {
                token: self.token()?,
            },
            "approle" => Auth::AppRole {
                mount: mount("approle"),
                role_id: given(&self.role_id, "role_id")?,
                secret_id: self.secret_id.clone(),
            },
            "kubernetes" => Auth::Kubernetes {
                mount: mount("kubernetes"),
                role: given(&self.role, "role")?,
                jwt: match &self.jwt {
                    Some(j) => j.clone(),
                    None => read_file_secret(
                        &self.service_account_token_path,
                        "the service-account token file",
                    )?,
                },
            },
            "jwt" => Auth::Jwt {
                mount: mount("jwt"),
                role: self.role.clone(),
                jwt: given(&self.jwt, "jwt")?,
            },
            "userpass" => Auth::Userpass {
                mount: mount("userpass"),
                username: given(&self.username, "username")?,
                password: given(&self.password, "password")?,
            },
            other => return Err(Failure::new(format!("unsupported auth_method {other}"))),
        })
    }
}

/// The KV version of a mount: given, or detected once per mount with `sys/internal/ui/mounts`.
pub struct KvVersions {
    given: Option<KvVersion>,
    seen: HashMap<String, KvVersion>,
}

impl KvVersions {
    pub fn new(given: Option<u64>) -> Result<Self, Failure> {
        let given = match given {
            None => None,
            Some(n) => Some(KvVersion::from_number(n).ok_or("kv_version must be 1 or 2")?),
        };
        Ok(KvVersions {
            given,
            seen: HashMap::new(),
        })
    }

    pub fn get(&mut self, vault: &Vault, mount: &str) -> Result<KvVersion, Failure> {
        if let Some(v) = self.given.or_else(|| self.seen.get(mount).copied()) {
            return Ok(v);
        }
        // Only Vault's own answer says something about the mount; an unreachable or untrusted server,
        // a sealed Vault or a refused path is reported as it is.
        let info = vault.mount_info(mount).map_err(|e| match e {
            VaultError::Api { .. } | VaultError::Decode { .. } => Failure::new(format!(
                "cannot detect the KV version of mount '{mount}' ({e}); check engine_mount_point, or set kv_version"
            )),
            other => Failure::new(other.to_string()),
        })?;
        let v = info.kv.ok_or_else(|| {
            Failure::new(format!(
                "engine_mount_point '{mount}' is a '{}' secrets engine, not KV",
                info.engine
            ))
        })?;
        self.seen.insert(mount.to_string(), v);
        Ok(v)
    }
}
