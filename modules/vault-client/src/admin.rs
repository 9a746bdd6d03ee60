//! Administration calls the modules need besides KV: auth mounts, ACL policies, and reading an
//! optional object (an auth method's config or role) where 404 means "not there yet".

use proxshift_http::reqwest::Method;
use serde_json::{json, Value};

use crate::{api_error, clean_path, Error, Vault};

impl Vault {
    /// `GET path`, `None` when Vault answers 404 (no such config, role or policy).
    pub fn read_optional(&self, path: &str) -> Result<Option<Value>, Error> {
        let (status, body) = self.call(Method::GET, path, None)?;
        match status {
            404 => Ok(None),
            s if s >= 400 => Err(api_error(&Method::GET, path, s, &body)),
            _ => Ok(Some(body)),
        }
    }

    /// The type of the auth method mounted at `auth/<path>` (`kubernetes`, `approle`, …), `None` when
    /// nothing is mounted there. Reads `sys/auth`, which every Vault and OpenBao release serves.
    pub fn auth_mount_type(&self, path: &str) -> Result<Option<String>, Error> {
        let listed = self.read("sys/auth")?;
        let key = format!("{}/", clean_path(path));
        // Newer servers put the mounts under `data`, older ones (and OpenBao, too) also at the top.
        let entry = listed
            .get("data")
            .and_then(|d| d.get(&key))
            .or_else(|| listed.get(&key));
        Ok(entry.and_then(|e| e["type"].as_str()).map(str::to_string))
    }

    /// Enable the auth method `kind` at `auth/<path>`.
    pub fn enable_auth(&self, path: &str, kind: &str, description: &str) -> Result<(), Error> {
        let at = format!("sys/auth/{}", clean_path(path));
        self.write(&at, &json!({"type": kind, "description": description}))?;
        Ok(())
    }

    /// The rules of ACL policy `name`, `None` when it does not exist.
    pub fn acl_policy(&self, name: &str) -> Result<Option<String>, Error> {
        let v = self.read_optional(&format!("sys/policies/acl/{}", clean_path(name)))?;
        Ok(v.and_then(|v| {
            v.get("data")
                .and_then(|d| d["policy"].as_str())
                .or_else(|| v["policy"].as_str())
                .map(str::to_string)
        }))
    }

    /// Create or replace ACL policy `name`.
    pub fn put_acl_policy(&self, name: &str, rules: &str) -> Result<(), Error> {
        let at = format!("sys/policies/acl/{}", clean_path(name));
        self.write(&at, &json!({ "policy": rules }))?;
        Ok(())
    }
}
