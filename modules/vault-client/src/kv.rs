//! The KV secrets engine, versions 1 and 2.

use proxshift_http::reqwest::Method;
use serde_json::{json, Map, Value};

use crate::{api_error, clean_path, Error, Vault};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvVersion {
    V1,
    V2,
}

impl KvVersion {
    pub fn number(self) -> u8 {
        match self {
            KvVersion::V1 => 1,
            KvVersion::V2 => 2,
        }
    }

    pub fn from_number(n: u64) -> Option<Self> {
        match n {
            1 => Some(KvVersion::V1),
            2 => Some(KvVersion::V2),
            _ => None,
        }
    }
}

/// A secrets engine mount as `sys/internal/ui/mounts` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Without slashes: `secret`.
    pub path: String,
    /// `kv`, `generic`, `pki`, …
    pub engine: String,
    /// `None` when the mount is not a KV engine.
    pub kv: Option<KvVersion>,
}

impl Mount {
    fn from_ui(data: &Value) -> Option<Mount> {
        let path = clean_path(data["path"].as_str()?);
        let engine = data["type"].as_str().unwrap_or_default().to_string();
        let kv = match engine.as_str() {
            // `generic` is KV v1's old name; an absent version option means 1.
            "kv" | "generic" => match data["options"]["version"].as_str() {
                Some("2") => Some(KvVersion::V2),
                _ => Some(KvVersion::V1),
            },
            _ => None,
        };
        Some(Mount { path, engine, kv })
    }
}

/// One KV secret as read. For KV v2, a soft-deleted or destroyed latest version has `data: None`
/// but still a `version` (which the next check-and-set write must name).
#[derive(Debug, Clone, PartialEq)]
pub struct Secret {
    pub data: Option<Map<String, Value>>,
    /// KV v2 only.
    pub version: Option<u64>,
    /// KV v2 only: `created_time`, `deletion_time`, `destroyed`, `custom_metadata`, `version`.
    pub metadata: Option<Value>,
}

impl Secret {
    pub fn is_deleted(&self) -> bool {
        self.data.is_none()
    }
}

fn data_path(kv: KvVersion, mount: &str, path: &str) -> String {
    match kv {
        KvVersion::V1 => format!("{}/{}", clean_path(mount), clean_path(path)),
        KvVersion::V2 => format!("{}/data/{}", clean_path(mount), clean_path(path)),
    }
}

/// Interpret a KV read answer. Separate from I/O so the 404-with-metadata case is unit-tested.
fn parse_read(kv: KvVersion, status: u16, json: &Value) -> Option<Secret> {
    match kv {
        KvVersion::V1 => {
            if status == 404 {
                return None;
            }
            Some(Secret {
                data: json["data"].as_object().cloned(),
                version: None,
                metadata: None,
            })
        }
        KvVersion::V2 => {
            let metadata = json["data"]["metadata"].clone();
            let version = metadata["version"].as_u64();
            if status == 404 {
                // Deleted or destroyed: 404, but the body still carries the metadata.
                return version.map(|v| Secret {
                    data: None,
                    version: Some(v),
                    metadata: Some(metadata),
                });
            }
            let data = json["data"]["data"].as_object().cloned();
            Some(Secret {
                data,
                version,
                metadata: (!metadata.is_null()).then_some(metadata),
            })
        }
    }
}

impl Vault {
    /// The mount that `path` (e.g. `secret/app/db` or just `secret`) lives in, and its KV version.
    pub fn mount_info(&self, path: &str) -> Result<Mount, Error> {
        let api = format!("sys/internal/ui/mounts/{}", clean_path(path));
        let v = self.call_ok(Method::GET, &api, None)?;
        Mount::from_ui(&v["data"]).ok_or_else(|| Error::Decode {
            op: format!("GET {api}"),
            detail: "no data.path".into(),
        })
    }

    /// Read a secret; `version` (KV v2 only) picks an older one. `Ok(None)`: nothing at that path.
    pub fn kv_read(
        &self,
        kv: KvVersion,
        mount: &str,
        path: &str,
        version: Option<u64>,
    ) -> Result<Option<Secret>, Error> {
        let api = data_path(kv, mount, path);
        let mut query = Vec::new();
        if let Some(n) = version {
            if kv == KvVersion::V1 {
                return Err(Error::Config(format!(
                    "{mount}/{path}: KV v1 has no versions; `version` needs KV v2"
                )));
            }
            query.push(("version", n.to_string()));
        }
        let (status, json) = self.call_query(Method::GET, &api, &query, None)?;
        if status >= 400 && status != 404 {
            return Err(api_error(&Method::GET, &api, status, &json));
        }
        Ok(parse_read(kv, status, &json))
    }

    /// Write `data` (the whole secret). KV v2: `cas` is the version this write expects to replace
    /// (0 = must not exist); returns the new version. KV v1 has no versions and no check-and-set.
    pub fn kv_write(
        &self,
        kv: KvVersion,
        mount: &str,
        path: &str,
        data: &Map<String, Value>,
        cas: Option<u64>,
    ) -> Result<Option<u64>, Error> {
        let api = data_path(kv, mount, path);
        let body = match kv {
            KvVersion::V1 => {
                if cas.is_some() {
                    return Err(Error::Config(format!(
                        "{mount}/{path}: KV v1 has no check-and-set; `cas` needs KV v2"
                    )));
                }
                Value::Object(data.clone())
            }
            KvVersion::V2 => match cas {
                Some(c) => json!({"options": {"cas": c}, "data": data}),
                None => json!({"data": data}),
            },
        };
        let v = self.call_ok(Method::POST, &api, Some(&body))?;
        Ok(v["data"]["version"].as_u64())
    }

    /// Soft-delete the latest version (KV v2; undeletable) or delete the secret (KV v1).
    pub fn kv_delete(&self, kv: KvVersion, mount: &str, path: &str) -> Result<(), Error> {
        self.call_ok(Method::DELETE, &data_path(kv, mount, path), None)
            .map(|_| ())
    }

    /// KV v2: remove every version and the metadata, for good. KV v1: the same as delete.
    pub fn kv_destroy(&self, kv: KvVersion, mount: &str, path: &str) -> Result<(), Error> {
        let api = match kv {
            KvVersion::V1 => data_path(kv, mount, path),
            KvVersion::V2 => format!("{}/metadata/{}", clean_path(mount), clean_path(path)),
        };
        self.call_ok(Method::DELETE, &api, None).map(|_| ())
    }

    /// KV v2 metadata (`current_version`, `versions`, `cas_required`, …); `Ok(None)` when absent.
    pub fn kv_metadata(&self, mount: &str, path: &str) -> Result<Option<Value>, Error> {
        let api = format!("{}/metadata/{}", clean_path(mount), clean_path(path));
        let (status, json) = self.call(Method::GET, &api, None)?;
        match status {
            404 => Ok(None),
            s if s >= 400 => Err(api_error(&Method::GET, &api, s, &json)),
            _ => Ok(Some(json["data"].clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_from_the_ui_endpoint() {
        let v2 = json!({"path": "secret/", "type": "kv", "options": {"version": "2"}});
        assert_eq!(
            Mount::from_ui(&v2),
            Some(Mount {
                path: "secret".into(),
                engine: "kv".into(),
                kv: Some(KvVersion::V2)
            })
        );
        let v1 = json!({"path": "kv/", "type": "kv", "options": null});
        assert_eq!(Mount::from_ui(&v1).unwrap().kv, Some(KvVersion::V1));
        let pki = json!({"path": "pki/", "type": "pki"});
        assert_eq!(Mount::from_ui(&pki).unwrap().kv, None);
        assert_eq!(Mount::from_ui(&json!({})), None);
    }

    #[test]
    fn paths() {
        assert_eq!(
            data_path(KvVersion::V2, "/secret/", "/infra/bmc"),
            "secret/data/infra/bmc"
        );
        assert_eq!(data_path(KvVersion::V1, "kv", "a/b"), "kv/a/b");
    }

    #[test]
    fn read_answers() {
        let ok =
            json!({"data": {"data": {"a": "1"}, "metadata": {"version": 3, "destroyed": false}}});
        let s = parse_read(KvVersion::V2, 200, &ok).unwrap();
        assert_eq!(s.data.unwrap()["a"], json!("1"));
        assert_eq!(s.version, Some(3));
        let deleted = json!({"data": {"data": null, "metadata": {"version": 4, "deletion_time": "2026-01-01T00:00:00Z"}}});
        let s = parse_read(KvVersion::V2, 404, &deleted).unwrap();
        assert!(s.is_deleted());
        assert_eq!(s.version, Some(4));
        assert_eq!(parse_read(KvVersion::V2, 404, &json!({"errors": []})), None);
        let v1 = json!({"data": {"user": "u"}});
        assert_eq!(
            parse_read(KvVersion::V1, 200, &v1).unwrap().data.unwrap()["user"],
            json!("u")
        );
        assert_eq!(parse_read(KvVersion::V1, 404, &json!({"errors": []})), None);
    }
}
