//! The pure part of `state=kubernetes_auth` and `state=policy`: what Vault holds against what the
//! task wants, field by field, the bodies to write and the diff views. No I/O; `admin.rs` feeds it
//! what Vault answered.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::plan::MASKED;

/// The `config` of a Kubernetes auth mount as the task wants it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigWant {
    pub kubernetes_host: String,
    pub kubernetes_ca_cert: Option<String>,
    /// Whether the task gives a token-reviewer JWT (its value never reaches this module part).
    pub reviewer_jwt: bool,
}

/// One role of the mount, options named as Vault names the role's fields.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RoleWant {
    pub name: String,
    pub bound_service_account_names: Vec<String>,
    pub bound_service_account_namespaces: Vec<String>,
    #[serde(default)]
    pub token_policies: Vec<String>,
    pub token_ttl: u64,
    pub audience: Option<String>,
}

fn pem_eq(a: &str, b: &str) -> bool {
    let lines = |s: &str| -> Vec<String> {
        s.lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    };
    lines(a) == lines(b)
}

fn host_eq(a: &str, b: &str) -> bool {
    a.trim().trim_end_matches('/') == b.trim().trim_end_matches('/')
}

/// The config fields that differ (`current`: the `data` of `GET auth/<mount>/config`, `None` when
/// the mount has no config yet). Vault never returns the reviewer JWT, only whether one is set, so a
/// JWT is written with every config change and when Vault has none.
pub fn config_changes(current: Option<&Value>, want: &ConfigWant) -> Vec<&'static str> {
    let Some(cur) = current else {
        let mut all = vec!["kubernetes_host", "disable_local_ca_jwt"];
        if want.kubernetes_ca_cert.is_some() {
            all.insert(1, "kubernetes_ca_cert");
        }
        if want.reviewer_jwt {
            all.push("token_reviewer_jwt");
        }
        return all;
    };
    let mut out = Vec::new();
    if !host_eq(
        cur["kubernetes_host"].as_str().unwrap_or_default(),
        &want.kubernetes_host,
    ) {
        out.push("kubernetes_host");
    }
    if let Some(ca) = &want.kubernetes_ca_cert {
        if !pem_eq(cur["kubernetes_ca_cert"].as_str().unwrap_or_default(), ca) {
            out.push("kubernetes_ca_cert");
        }
    }
    if cur["disable_local_ca_jwt"] != json!(true) {
        out.push("disable_local_ca_jwt");
    }
    let jwt_set = cur["token_reviewer_jwt_set"] == json!(true);
    if want.reviewer_jwt && (!jwt_set || !out.is_empty()) {
        out.push("token_reviewer_jwt");
    }
    out
}

/// The body of `POST auth/<mount>/config`. Vault runs outside the cluster, so it must never fall
/// back to a local service-account token or CA (`disable_local_ca_jwt`).
pub fn config_body(want: &ConfigWant, jwt: Option<&str>) -> Value {
    let mut body = json!({
        "kubernetes_host": want.kubernetes_host.trim(),
        "disable_local_ca_jwt": true,
    });
    if let Some(ca) = &want.kubernetes_ca_cert {
        body["kubernetes_ca_cert"] = json!(ca);
    }
    if let Some(j) = jwt {
        body["token_reviewer_jwt"] = json!(j);
    }
    body
}

/// The compared config fields of `current` (or of `want`), for the diff; the JWT is only ever
/// shown as set or not.
pub fn config_view(current: Option<&Value>, want: Option<&ConfigWant>) -> Value {
    match (current, want) {
        (_, Some(w)) => json!({
            "kubernetes_host": w.kubernetes_host.trim(),
            "kubernetes_ca_cert": w.kubernetes_ca_cert,
            "disable_local_ca_jwt": true,
            "token_reviewer_jwt": if w.reviewer_jwt { json!(MASKED) } else { Value::Null },
        }),
        (Some(c), None) => json!({
            "kubernetes_host": c["kubernetes_host"],
            "kubernetes_ca_cert": c["kubernetes_ca_cert"],
            "disable_local_ca_jwt": c["disable_local_ca_jwt"],
            "token_reviewer_jwt": if c["token_reviewer_jwt_set"] == json!(true) { json!(MASKED) } else { Value::Null },
        }),
        (None, None) => json!({}),
    }
}

fn same_set(cur: &Value, want: &[String]) -> bool {
    let mut a: Vec<&str> = cur
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Vault answers a comma-separated string for some fields on older releases.
    if a.is_empty() {
        if let Some(s) = cur.as_str() {
            a = s
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
        }
    }
    let mut b: Vec<&str> = want.iter().map(String::as_str).collect();
    a.sort_unstable();
    a.dedup();
    b.sort_unstable();
    b.dedup();
    a == b
}

/// The role fields that differ (`current`: the `data` of `GET auth/<mount>/role/<name>`).
pub fn role_changes(current: Option<&Value>, want: &RoleWant) -> Vec<&'static str> {
    let Some(cur) = current else {
        return vec!["created"];
    };
    let mut out = Vec::new();
    if !same_set(
        &cur["bound_service_account_names"],
        &want.bound_service_account_names,
    ) {
        out.push("bound_service_account_names");
    }
    if !same_set(
        &cur["bound_service_account_namespaces"],
        &want.bound_service_account_namespaces,
    ) {
        out.push("bound_service_account_namespaces");
    }
    if !same_set(&cur["token_policies"], &want.token_policies) {
        out.push("token_policies");
    }
    if cur["token_ttl"].as_u64().unwrap_or_default() != want.token_ttl {
        out.push("token_ttl");
    }
    let audience = cur["audience"].as_str().unwrap_or_default();
    if audience != want.audience.as_deref().unwrap_or_default() {
        out.push("audience");
    }
    out
}

/// The body of `POST auth/<mount>/role/<name>`, also the diff's "after" view.
pub fn role_body(want: &RoleWant) -> Value {
    json!({
        "bound_service_account_names": want.bound_service_account_names,
        "bound_service_account_namespaces": want.bound_service_account_namespaces,
        "token_policies": want.token_policies,
        "token_ttl": want.token_ttl,
        "audience": want.audience.clone().unwrap_or_default(),
    })
}

/// The compared fields of a role Vault holds, for the diff's "before" view.
pub fn role_view(current: Option<&Value>) -> Value {
    match current {
        None => json!({}),
        Some(c) => json!({
            "bound_service_account_names": c["bound_service_account_names"],
            "bound_service_account_namespaces": c["bound_service_account_namespaces"],
            "token_policies": c["token_policies"],
            "token_ttl": c["token_ttl"],
            "audience": c["audience"],
        }),
    }
}

/// Whether ACL policy rules need writing: absent, or different once trailing blanks are ignored.
pub fn policy_differs(current: Option<&str>, want: &str) -> bool {
    let norm =
        |s: &str| -> Vec<String> { s.trim().lines().map(|l| l.trim_end().to_string()).collect() };
    current.is_none_or(|c| norm(c) != norm(want))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want() -> ConfigWant {
        ConfigWant {
            kubernetes_host: "https://api.c1.example.com:6443".into(),
            kubernetes_ca_cert: Some(
                "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n".into(),
            ),
            reviewer_jwt: true,
        }
    }

    fn role() -> RoleWant {
        RoleWant {
            name: "eso".into(),
            bound_service_account_names: vec!["external-secrets".into()],
            bound_service_account_namespaces: vec!["external-secrets".into()],
            token_policies: vec!["c1-read".into()],
            token_ttl: 3600,
            audience: None,
        }
    }

    #[test]
    fn a_new_mount_sets_every_field() {
        assert_eq!(
            config_changes(None, &want()),
            vec![
                "kubernetes_host",
                "kubernetes_ca_cert",
                "disable_local_ca_jwt",
                "token_reviewer_jwt"
            ]
        );
    }

    #[test]
    fn an_equal_config_is_no_change_and_the_jwt_is_only_sent_with_a_change() {
        let cur = json!({"kubernetes_host": "https://api.c1.example.com:6443/",
            "kubernetes_ca_cert": "-----BEGIN CERTIFICATE-----\r\nAAA\r\n-----END CERTIFICATE-----",
            "disable_local_ca_jwt": true, "token_reviewer_jwt_set": true});
        assert!(config_changes(Some(&cur), &want()).is_empty());
        let mut moved = want();
        moved.kubernetes_host = "https://api.c1.example.com:443".into();
        assert_eq!(
            config_changes(Some(&cur), &moved),
            vec!["kubernetes_host", "token_reviewer_jwt"]
        );
        let mut unset = cur.clone();
        unset["token_reviewer_jwt_set"] = json!(false);
        assert_eq!(
            config_changes(Some(&unset), &want()),
            vec!["token_reviewer_jwt"]
        );
        let mut local = cur;
        local["disable_local_ca_jwt"] = json!(false);
        assert_eq!(
            config_changes(Some(&local), &want()),
            vec!["disable_local_ca_jwt", "token_reviewer_jwt"]
        );
    }

    #[test]
    fn the_body_and_views_never_hold_the_jwt_except_the_body() {
        let b = config_body(&want(), Some("canary-jwt"));
        assert_eq!(b["token_reviewer_jwt"], json!("canary-jwt"));
        assert_eq!(b["disable_local_ca_jwt"], json!(true));
        let v = config_view(None, Some(&want()));
        assert_eq!(v["token_reviewer_jwt"], json!(MASKED));
        let cur = json!({"kubernetes_host": "h", "token_reviewer_jwt_set": false});
        assert_eq!(
            config_view(Some(&cur), None)["token_reviewer_jwt"],
            Value::Null
        );
    }

    #[test]
    fn roles_compare_as_sets_with_ttl_and_audience() {
        assert_eq!(role_changes(None, &role()), vec!["created"]);
        let cur = json!({"bound_service_account_names": ["external-secrets"],
            "bound_service_account_namespaces": ["external-secrets", "external-secrets"],
            "token_policies": ["c1-read"], "token_ttl": 3600, "audience": ""});
        assert!(role_changes(Some(&cur), &role()).is_empty());
        let mut r = role();
        r.token_policies.push("default".into());
        r.audience = Some("vault".into());
        r.token_ttl = 600;
        assert_eq!(
            role_changes(Some(&cur), &r),
            vec!["token_policies", "token_ttl", "audience"]
        );
        let csv = json!({"bound_service_account_names": "external-secrets",
            "bound_service_account_namespaces": "external-secrets",
            "token_policies": "c1-read", "token_ttl": 3600});
        assert!(role_changes(Some(&csv), &role()).is_empty());
        assert_eq!(role_body(&role())["audience"], json!(""));
    }

    #[test]
    fn policies_ignore_trailing_blanks() {
        let want = "path \"secret/data/c1/*\" {\n  capabilities = [\"read\"]\n}\n";
        assert!(policy_differs(None, want));
        assert!(!policy_differs(
            Some("path \"secret/data/c1/*\" {  \n  capabilities = [\"read\"]\n}"),
            want
        ));
        assert!(policy_differs(Some("path \"secret/data/c2/*\" {}"), want));
    }
}
