//! The I/O half: requests against one API server through the shared `proxshift_http` layer.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use proxshift_http::{
    is_transient_status, is_transient_transport, Backoff, ClientOptions, Poll, WaitError,
};
use serde_json::Value;

use crate::error::KubeError;
use crate::kubeconfig::Connection;
use crate::objects::{api_root, unmet, Resource};

/// How a PATCH body is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 7386 JSON merge patch.
    Merge,
    /// RFC 6902 JSON patch (a list of operations).
    Json,
    /// Kubernetes strategic merge patch (built-in kinds only).
    Strategic,
}

impl PatchType {
    fn content_type(self) -> &'static str {
        match self {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
        }
    }
}

/// The field manager name for server-side apply.
pub const FIELD_MANAGER: &str = "proxshift";

pub struct Client {
    http: proxshift_http::reqwest::blocking::Client,
    conn: Connection,
    backoff: Backoff,
    discovered: RefCell<HashMap<String, Vec<Resource>>>,
}

impl Client {
    pub fn new(conn: &Connection) -> Result<Self, KubeError> {
        Self::with_options(conn, ClientOptions::default())
    }

    pub fn with_options(conn: &Connection, mut opts: ClientOptions) -> Result<Self, KubeError> {
        opts.tls = conn.tls.clone();
        let http = proxshift_http::client(&opts)?;
        Ok(Client {
            http,
            conn: conn.clone(),
            backoff: Backoff::default(),
            discovered: RefCell::new(HashMap::new()),
        })
    }

    /// Retry policy for transient failures (tests use [`Backoff::none`]).
    pub fn set_backoff(&mut self, b: Backoff) {
        self.backoff = b;
    }

    pub fn server(&self) -> &str {
        &self.conn.server
    }

    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// One request with retries on transient failures; the raw body of a 2xx answer.
    pub fn send(
        &self,
        method: &str,
        path_and_query: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> Result<Vec<u8>, KubeError> {
        let url = format!("{}{path_and_query}", self.conn.server);
        let m: proxshift_http::reqwest::Method = method
            .parse()
            .map_err(|_| KubeError::BadMethod(method.to_string()))?;
        let path = path_and_query.split('?').next().unwrap_or_default();
        self.backoff
            .retry(
                |_| {
                    let mut rb = self
                        .http
                        .request(m.clone(), &url)
                        .header("Accept", "application/json");
                    if let Some(t) = &self.conn.token {
                        rb = rb.bearer_auth(t);
                    } else if let Some((u, p)) = &self.conn.basic {
                        rb = rb.basic_auth(u, Some(p));
                    }
                    if let Some((ct, b)) = &body {
                        rb = rb.header("Content-Type", *ct).body(b.clone());
                    }
                    let resp = rb.send().map_err(|e| {
                        let retry = is_transient_transport(&e);
                        (
                            KubeError::Transport {
                                request: format!("{method} {url}"),
                                source: e,
                            },
                            retry,
                        )
                    })?;
                    let status = resp.status().as_u16();
                    let bytes = resp.bytes().map_err(|e| {
                        (
                            KubeError::Transport {
                                request: format!("{method} {url}: reading the answer"),
                                source: e,
                            },
                            false,
                        )
                    })?;
                    if (200..300).contains(&status) {
                        Ok(bytes.to_vec())
                    } else {
                        Err((
                            KubeError::from_response(method, path, status, &bytes),
                            is_transient_status(status),
                        ))
                    }
                },
                |(_, retry)| *retry,
            )
            .map_err(|(e, _)| e)
    }

    fn json(
        &self,
        method: &str,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> Result<Value, KubeError> {
        let bytes = self.send(method, path, body)?;
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes).map_err(|source| KubeError::NotJson {
            request: format!("{method} {path}"),
            source,
        })
    }

    /// GET any path as JSON.
    pub fn get_path(&self, path: &str) -> Result<Value, KubeError> {
        self.json("GET", path, None)
    }

    /// GET any path as text (`/readyz`, `/version`).
    pub fn get_text(&self, path: &str) -> Result<String, KubeError> {
        Ok(String::from_utf8_lossy(&self.send("GET", path, None)?).into_owned())
    }

    /// The object, or `None` when it does not exist.
    pub fn get(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, KubeError> {
        match self.json("GET", &r.item(ns, name), None) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every item of a collection, optionally filtered by a label selector (follows `continue`).
    pub fn list(
        &self,
        r: &Resource,
        ns: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<Value>, KubeError> {
        self.list_selected(r, ns, label_selector, None)
    }

    /// [`Client::list`] with a field selector too (`spec.nodeName=worker-0`); `ns: None` on a
    /// namespaced kind lists all namespaces.
    pub fn list_selected(
        &self,
        r: &Resource,
        ns: Option<&str>,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Vec<Value>, KubeError> {
        let mut items = Vec::new();
        let mut cont: Option<String> = None;
        loop {
            let mut q = vec![("limit".to_string(), "500".to_string())];
            if let Some(s) = label_selector {
                q.push(("labelSelector".into(), s.into()));
            }
            if let Some(s) = field_selector {
                q.push(("fieldSelector".into(), s.into()));
            }
            if let Some(c) = &cont {
                q.push(("continue".into(), c.clone()));
            }
            let v = self.json("GET", &format!("{}?{}", r.collection(ns), query(&q)), None)?;
            if let Some(a) = v.get("items").and_then(Value::as_array) {
                items.extend(a.iter().map(|i| r.typed(i.clone())));
            }
            cont = v
                .pointer("/metadata/continue")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_string);
            if cont.is_none() {
                return Ok(items);
            }
        }
    }

    pub fn create(&self, r: &Resource, ns: Option<&str>, obj: &Value) -> Result<Value, KubeError> {
        self.json(
            "POST",
            &r.collection(ns),
            Some(("application/json", obj.to_string().into_bytes())),
        )
    }

    pub fn replace(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        obj: &Value,
    ) -> Result<Value, KubeError> {
        self.json(
            "PUT",
            &r.item(ns, name),
            Some(("application/json", obj.to_string().into_bytes())),
        )
    }

    pub fn patch(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        patch: &Value,
        pt: PatchType,
    ) -> Result<Value, KubeError> {
        self.json(
            "PATCH",
            &r.item(ns, name),
            Some((pt.content_type(), patch.to_string().into_bytes())),
        )
    }

    /// Patch the `status` subresource (what controllers, and the tests playing them, do).
    pub fn patch_status(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<Value, KubeError> {
        self.json(
            "PATCH",
            &format!("{}/status", r.item(ns, name)),
            Some((
                PatchType::Merge.content_type(),
                patch.to_string().into_bytes(),
            )),
        )
    }

    /// Server-side apply (JSON is YAML) as [`FIELD_MANAGER`]. `force` takes over fields other managers
    /// own; without it a clash is a 409 naming the fields and their manager.
    pub fn apply(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        obj: &Value,
        force: bool,
        dry_run: bool,
    ) -> Result<Value, KubeError> {
        self.apply_as(r, ns, name, obj, FIELD_MANAGER, force, dry_run)
    }

    /// [`Client::apply`] as `field_manager`; `dry_run` asks for `dryRun=All`: the server validates,
    /// defaults and answers with the object it would store, and stores nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn apply_as(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        obj: &Value,
        field_manager: &str,
        force: bool,
        dry_run: bool,
    ) -> Result<Value, KubeError> {
        let mut q = vec![("fieldManager".to_string(), field_manager.to_string())];
        if force {
            q.push(("force".into(), "true".into()));
        }
        if dry_run {
            q.push(("dryRun".into(), "All".into()));
        }
        self.json(
            "PATCH",
            &format!("{}?{}", r.item(ns, name), query(&q)),
            Some(("application/apply-patch+yaml", obj.to_string().into_bytes())),
        )
    }

    /// POST `body` to a subresource of an object (`pods/NAME/eviction`); the answer.
    pub fn create_subresource(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        subresource: &str,
        body: &Value,
    ) -> Result<Value, KubeError> {
        self.json(
            "POST",
            &format!("{}/{subresource}", r.item(ns, name)),
            Some(("application/json", body.to_string().into_bytes())),
        )
    }

    /// PUT `obj` to a subresource of an object (`certificatesigningrequests/NAME/approval`).
    pub fn replace_subresource(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        subresource: &str,
        obj: &Value,
    ) -> Result<Value, KubeError> {
        self.json(
            "PUT",
            &format!("{}/{subresource}", r.item(ns, name)),
            Some(("application/json", obj.to_string().into_bytes())),
        )
    }

    /// The `apiVersion` and kind a subresource takes, as discovery of `api_version` lists it
    /// (`v1`, `pods/eviction` → `policy/v1beta1` `Eviction` on Kubernetes 1.20, `policy/v1` from
    /// 1.22). A subresource of the parent's own group/version has no group/version of its own in
    /// discovery and gets the parent's. `None` when the subresource is not listed.
    pub fn subresource_kind(
        &self,
        api_version: &str,
        subresource: &str,
    ) -> Result<Option<(String, String)>, KubeError> {
        let list = self.get_path(&api_root(api_version))?;
        Ok(subresource_kind_in(&list, api_version, subresource))
    }

    /// Delete; `Ok(false)` when it was already gone.
    pub fn delete(&self, r: &Resource, ns: Option<&str>, name: &str) -> Result<bool, KubeError> {
        self.delete_with(r, ns, name, false)
    }

    /// [`Client::delete`]; `dry_run` asks for `dryRun=All` (the server checks, deletes nothing).
    pub fn delete_with(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        dry_run: bool,
    ) -> Result<bool, KubeError> {
        let mut body = serde_json::json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"});
        if dry_run {
            body["dryRun"] = serde_json::json!(["All"]);
        }
        match self.json(
            "DELETE",
            &r.item(ns, name),
            Some(("application/json", body.to_string().into_bytes())),
        ) {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Find the resource for `apiVersion` + `kind` through API discovery (cached per group/version).
    pub fn resolve(&self, api_version: &str, kind: &str) -> Result<Resource, KubeError> {
        if let Some(r) = self
            .discovered
            .borrow()
            .get(api_version)
            .and_then(|rs| rs.iter().find(|r| r.kind == kind))
        {
            return Ok(r.clone());
        }
        let list = self.get_path(&api_root(api_version)).map_err(|e| {
            if e.is_not_found() {
                KubeError::NotServed {
                    api_version: api_version.into(),
                    kind: kind.into(),
                    group_version_served: false,
                }
            } else {
                e
            }
        })?;
        let rs: Vec<Resource> = list
            .get("resources")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| {
                        let name = x.get("name")?.as_str()?;
                        (!name.contains('/')).then(|| {
                            Resource::new(
                                api_version,
                                x.get("kind").and_then(Value::as_str).unwrap_or_default(),
                                name,
                                x.get("namespaced")
                                    .and_then(Value::as_bool)
                                    .unwrap_or(false),
                            )
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let found = rs.iter().find(|r| r.kind == kind).cloned();
        self.discovered
            .borrow_mut()
            .insert(api_version.to_string(), rs);
        found.ok_or_else(|| KubeError::NotServed {
            api_version: api_version.into(),
            kind: kind.into(),
            group_version_served: true,
        })
    }

    /// Forget discovery results (after installing CRDs).
    pub fn forget_discovery(&self) {
        self.discovered.borrow_mut().clear();
    }

    /// Wait until the object exists and meets every `(type, status)` condition; returns it.
    pub fn wait_for_conditions(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        wanted: &[(&str, &str)],
        timeout: Duration,
        interval: Duration,
    ) -> Result<Value, WaitError<KubeError>> {
        self.wait_until(r, ns, name, |obj| unmet(obj, wanted), timeout, interval)
    }

    /// Wait until the object exists and `unmet` finds nothing missing in it; returns it. `unmet` says
    /// what is still missing (as [`unmet`] and [`crate::objects::unmet_values`] do); on timeout the
    /// error names the object and those.
    pub fn wait_until(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        unmet: impl Fn(&Value) -> Vec<String>,
        timeout: Duration,
        interval: Duration,
    ) -> Result<Value, WaitError<KubeError>> {
        crate::wait_for(timeout, interval, || {
            Ok(match self.get(r, ns, name)? {
                None => Poll::Pending(format!("{} to exist", r.describe(ns, name))),
                Some(obj) => {
                    let missing = unmet(&obj);
                    if missing.is_empty() {
                        Poll::Ready(obj)
                    } else {
                        Poll::Pending(format!("{}: {}", r.describe(ns, name), missing.join(", ")))
                    }
                }
            })
        })
    }

    /// Wait until the object is gone.
    pub fn wait_deleted(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        timeout: Duration,
        interval: Duration,
    ) -> Result<(), WaitError<KubeError>> {
        crate::wait_for(timeout, interval, || {
            Ok(match self.get(r, ns, name)? {
                None => Poll::Ready(()),
                Some(obj) => {
                    let mut what = format!("{} to be deleted", r.describe(ns, name));
                    if let Some(p) = obj.pointer("/status/phase").and_then(Value::as_str) {
                        what.push_str(&format!(" (phase {p})"));
                    }
                    let fins: Vec<&str> = obj
                        .pointer("/metadata/finalizers")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    if !fins.is_empty() {
                        what.push_str(&format!(" (finalizers: {})", fins.join(", ")));
                    }
                    let msgs: Vec<String> = crate::objects::conditions(&obj)
                        .into_iter()
                        .filter(|c| c.status == "True" && c.type_.contains("Remaining"))
                        .filter_map(|c| c.message)
                        .collect();
                    if !msgs.is_empty() {
                        what.push_str(&format!(": {}", msgs.join("; ")));
                    }
                    Poll::Pending(what)
                }
            })
        })
    }
}

/// The pure half of [`Client::subresource_kind`]: read an `APIResourceList`.
pub fn subresource_kind_in(
    list: &Value,
    api_version: &str,
    subresource: &str,
) -> Option<(String, String)> {
    let entry = list
        .get("resources")
        .and_then(Value::as_array)?
        .iter()
        .find(|x| x.get("name").and_then(Value::as_str) == Some(subresource))?;
    let s = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or_default();
    let version = match (s("group"), s("version")) {
        (_, "") => api_version.to_string(),
        ("", v) => v.to_string(),
        (g, v) => format!("{g}/{v}"),
    };
    Some((version, s("kind").to_string()))
}

/// `a=b&c=d` with percent-encoding of the values.
fn query(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

pub(crate) fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn subresource_kind_reads_discovery() {
        let list = serde_json::json!({"resources": [
            {"name": "pods", "kind": "Pod"},
            {"name": "pods/eviction", "group": "policy", "version": "v1beta1", "kind": "Eviction"},
            {"name": "pods/status", "kind": "Pod"},
        ]});
        assert_eq!(
            super::subresource_kind_in(&list, "v1", "pods/eviction"),
            Some(("policy/v1beta1".into(), "Eviction".into()))
        );
        assert_eq!(
            super::subresource_kind_in(&list, "v1", "pods/status"),
            Some(("v1".into(), "Pod".into()))
        );
        assert_eq!(super::subresource_kind_in(&list, "v1", "pods/exec"), None);
    }

    #[test]
    fn query_is_encoded() {
        assert_eq!(
            super::query(&[("labelSelector".into(), "a=b,c in (d)".into())]),
            "labelSelector=a%3Db%2Cc%20in%20%28d%29"
        );
    }
}
