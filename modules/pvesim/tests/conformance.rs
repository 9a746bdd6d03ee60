//! Walks the embedded schema subset: every implemented method answers a valid request,
//! rejects unknown parameters, and reports every mistyped parameter in PVE's error shape.

mod common;

use std::collections::BTreeMap;

use common::{enc, start, Api, Resp};
use pvesim::schema::{schema, MethodDef};
use serde_json::Value;

/// Fills `{node}`-style path variables with values that exist in the lab seed.
fn concrete_path(template: &str) -> String {
    template
        .replace("{node}", "pve1")
        .replace("{vmid}", "100")
        .replace("{storage}", "local")
        .replace("{volume}", "local%3Aiso%2Fagent.x86_64.iso")
        .replace("{userid}", "ansible@pve")
        .replace("{tokenid}", "ci")
        .replace("{roleid}", "ProxShiftProvisioner")
        .replace("{snapname}", "snap1")
        .replace("{sid}", "vm%3A100")
        .replace("{rule}", "conf-rule")
        .replace("{group}", "conf-group")
}

fn path_vars(template: &str) -> Vec<String> {
    template
        .split('/')
        .filter(|s| s.starts_with('{'))
        .map(|s| s.trim_matches(|c| c == '{' || c == '}').to_string())
        .collect()
}

fn send(api: &Api, method: &str, path: &str, params: &[(&str, &str)]) -> Resp {
    match method {
        "GET" => api.get(path, params),
        "DELETE" => api.delete(path, params),
        "POST" => api.post(path, params),
        "PUT" => api.put(path, params),
        _ => unreachable!(),
    }
}

/// A value that must fail the type/enum/range check of `prop`, if one can be derived.
fn invalid_value(prop: &Value) -> Option<String> {
    if prop.get("enum").is_some() {
        return Some("no-such-enum-value".into());
    }
    match prop.get("type").and_then(Value::as_str) {
        Some("boolean") => Some("true".into()),
        Some("integer") => Some("12abc".into()),
        Some("number") => Some("one".into()),
        Some("string") => {
            if let Some(max) = prop.get("maxLength").and_then(Value::as_u64) {
                return Some("x".repeat(max as usize + 1));
            }
            if prop.get("format").map(Value::is_object).unwrap_or(false) {
                return Some("nosuchkey=1".into());
            }
            None
        }
        _ => None,
    }
}

fn expected_fragment(prop: &Value, value: &str) -> String {
    if prop.get("enum").is_some() {
        return format!("value '{value}' does not have a value in the enumeration");
    }
    match prop.get("type").and_then(Value::as_str) {
        Some(t @ ("boolean" | "integer" | "number")) => {
            format!("type check ('{t}') failed - got '{value}'")
        }
        _ if value.starts_with("nosuchkey") => {
            "invalid key in comma-separated list property: nosuchkey".into()
        }
        _ => "characters long".into(),
    }
}

fn methods() -> Vec<&'static MethodDef> {
    let mut v: Vec<&MethodDef> = schema()
        .routes
        .iter()
        .flat_map(|r| r.methods.values())
        .collect();
    v.sort_by(|a, b| (&a.path, &a.method).cmp(&(&b.path, &b.method)));
    v
}

#[test]
fn every_method_reports_all_bad_parameters() {
    let sim = start();
    let api = Api::root(&sim);
    let mut checked = 0;
    for def in methods() {
        let vars = path_vars(&def.path);
        let mut bad: BTreeMap<String, String> = BTreeMap::new();
        for (name, prop) in &def.props {
            if vars.contains(name) {
                continue;
            }
            let key = name.replace("[n]", "0");
            if let Some(v) = invalid_value(prop) {
                bad.insert(key, v);
            }
        }
        // Plus one parameter the schema does not know.
        bad.insert("pvesim-unknown".into(), "1".into());
        let params: Vec<(&str, &str)> = bad.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let path = concrete_path(&def.path);
        let r = send(&api, &def.method, &path, &params);
        assert_eq!(r.status, 400, "{} {}: {:?}", def.method, def.path, r.body);
        assert_eq!(r.body["data"], Value::Null);
        assert_eq!(r.message(), "Parameter verification failed.\n");
        let errors = r.body["errors"].as_object().expect("errors object");
        // Required parameters we could not make invalid are missing, and reported as such.
        let missing = def
            .props
            .iter()
            .filter(|(k, p)| {
                !vars.contains(k)
                    && !k.ends_with("[n]")
                    && p.get("optional").and_then(Value::as_i64) != Some(1)
                    && !bad.contains_key(*k)
            })
            .count();
        // And optional ones that a given parameter `requires` (`append` needs `privs`).
        let required_by_given: std::collections::BTreeSet<&str> = def
            .props
            .iter()
            .filter(|(k, _)| bad.contains_key(&k.replace("[n]", "0")))
            .filter_map(|(_, p)| p.get("requires").and_then(Value::as_str))
            .filter(|r| !bad.contains_key(*r) && !vars.iter().any(|v| v == r))
            .filter(|r| def.props.get(*r).and_then(|p| p.get("optional")) == Some(&1.into()))
            .collect();
        assert_eq!(
            errors.len(),
            bad.len() + missing + required_by_given.len(),
            "{} {}: every bad field must be reported: {errors:?}",
            def.method,
            def.path
        );
        assert!(errors["pvesim-unknown"]
            .as_str()
            .unwrap()
            .contains("schema does not allow additional properties"));
        for (k, v) in &bad {
            if k == "pvesim-unknown" {
                continue;
            }
            let prop = pvesim::schema::lookup_prop(def, k).unwrap().1;
            let want = expected_fragment(prop, v);
            let got = errors[k].as_str().unwrap();
            assert!(
                got.contains(&want),
                "{} {} {k}: {got:?} lacks {want:?}",
                def.method,
                def.path
            );
        }
        checked += 1;
    }
    assert_eq!(checked, methods().len());
    // Nothing was changed by any rejected request.
    let writes_ok = sim.requests().iter().all(|r| r.status == 400);
    assert!(writes_ok);
}

#[test]
fn missing_required_parameters_are_reported() {
    let sim = start();
    let api = Api::root(&sim);
    for def in methods() {
        let vars = path_vars(&def.path);
        let required: Vec<&String> = def
            .props
            .iter()
            .filter(|(k, p)| {
                !vars.contains(k)
                    && !k.ends_with("[n]")
                    && p.get("optional").and_then(Value::as_i64) != Some(1)
            })
            .map(|(k, _)| k)
            .collect();
        if required.is_empty() || def.path.ends_with("/upload") {
            continue;
        }
        let r = send(&api, &def.method, &concrete_path(&def.path), &[]);
        assert_eq!(r.status, 400, "{} {}", def.method, def.path);
        for k in required {
            assert_eq!(
                r.error(k),
                "property is missing and it is not optional",
                "{} {} {k}",
                def.method,
                def.path
            );
        }
    }
}

/// (method, concrete path, parameters)
type Case = (&'static str, String, Vec<(&'static str, &'static str)>);

/// One valid request per implemented method, run in an order that keeps state consistent.
#[test]
fn every_method_accepts_a_valid_request() {
    let mut seed = pvesim::Seed::lab();
    assert!(seed.add_file(
        "pve1",
        "local",
        "vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
        120 << 20
    ));
    let sim = common::start_seed(seed);
    let api = Api::root(&sim);
    let upid = api.post("/nodes/pve1/qemu/100/status/reboot", &[]).upid();
    let upid_e = enc(&upid);
    let cases: Vec<Case> = vec![
        ("GET", "/version".into(), vec![]),
        ("GET", "/access/users".into(), vec![("full", "1")]),
        (
            "POST",
            "/access/users".into(),
            vec![
                ("userid", "conf@pve"),
                ("password", "conformance-pw"),
                ("comment", "c"),
            ],
        ),
        ("GET", "/access/users/conf@pve".into(), vec![]),
        ("GET", "/access/users/ansible@pve/token".into(), vec![]),
        ("GET", "/access/users/ansible@pve/token/ci".into(), vec![]),
        (
            "POST",
            "/access/users/ansible@pve/token/new".into(),
            vec![("privsep", "0"), ("comment", "x")],
        ),
        (
            "PUT",
            "/access/users/ansible@pve/token/new".into(),
            vec![("comment", "y")],
        ),
        (
            "DELETE",
            "/access/users/ansible@pve/token/new".into(),
            vec![],
        ),
        ("GET", "/access/roles".into(), vec![]),
        (
            "POST",
            "/access/roles".into(),
            vec![("roleid", "Tmp"), ("privs", "VM.Audit")],
        ),
        ("GET", "/access/roles/Tmp".into(), vec![]),
        (
            "PUT",
            "/access/roles/Tmp".into(),
            vec![("privs", "VM.PowerMgmt"), ("append", "1")],
        ),
        ("GET", "/access/acl".into(), vec![]),
        (
            "PUT",
            "/access/acl".into(),
            vec![
                ("path", "/vms/100"),
                ("roles", "Tmp"),
                ("users", "auditor@pve"),
            ],
        ),
        ("DELETE", "/access/roles/Tmp".into(), vec![]),
        ("GET", "/access/permissions".into(), vec![("path", "/vms")]),
        ("GET", "/cluster/nextid".into(), vec![]),
        ("GET", "/cluster/resources".into(), vec![("type", "vm")]),
        ("GET", "/nodes".into(), vec![]),
        ("GET", "/nodes/pve1/status".into(), vec![]),
        ("GET", "/nodes/pve1/qemu".into(), vec![("full", "1")]),
        (
            "POST",
            "/nodes/pve1/qemu".into(),
            vec![("vmid", "500"), ("scsi0", "local-lvm:4"), ("agent", "1")],
        ),
        ("GET", "/nodes/pve1/qemu/500".into(), vec![]),
        (
            "GET",
            "/nodes/pve1/qemu/500/config".into(),
            vec![("current", "1")],
        ),
        (
            "POST",
            "/nodes/pve1/qemu/500/config".into(),
            vec![("cores", "2")],
        ),
        (
            "PUT",
            "/nodes/pve1/qemu/500/config".into(),
            vec![("description", "hello")],
        ),
        ("GET", "/nodes/pve1/qemu/500/pending".into(), vec![]),
        (
            "PUT",
            "/nodes/pve1/qemu/500/resize".into(),
            vec![("disk", "scsi0"), ("size", "8G")],
        ),
        (
            "POST",
            "/nodes/pve1/qemu/9000/clone".into(),
            vec![("newid", "501"), ("name", "c1")],
        ),
        ("POST", "/nodes/pve1/qemu/501/template".into(), vec![]),
        ("GET", "/nodes/pve1/qemu/500/status".into(), vec![]),
        ("POST", "/nodes/pve1/qemu/500/status/start".into(), vec![]),
        ("GET", "/nodes/pve1/qemu/500/status/current".into(), vec![]),
        (
            "GET",
            "/nodes/pve1/qemu/500/agent/network-get-interfaces".into(),
            vec![],
        ),
        ("POST", "/nodes/pve1/qemu/500/agent/ping".into(), vec![]),
        (
            "GET",
            "/nodes/pve1/qemu/500/feature".into(),
            vec![("feature", "snapshot")],
        ),
        ("GET", "/nodes/pve1/qemu/500/snapshot".into(), vec![]),
        (
            "POST",
            "/nodes/pve1/qemu/500/snapshot".into(),
            vec![
                ("snapname", "conf1"),
                ("description", "c"),
                ("vmstate", "0"),
            ],
        ),
        ("GET", "/nodes/pve1/qemu/500/snapshot/conf1".into(), vec![]),
        (
            "GET",
            "/nodes/pve1/qemu/500/snapshot/conf1/config".into(),
            vec![],
        ),
        (
            "PUT",
            "/nodes/pve1/qemu/500/snapshot/conf1/config".into(),
            vec![("description", "d")],
        ),
        (
            "POST",
            "/nodes/pve1/qemu/500/snapshot/conf1/rollback".into(),
            vec![("start", "1")],
        ),
        (
            "DELETE",
            "/nodes/pve1/qemu/500/snapshot/conf1".into(),
            vec![("force", "1")],
        ),
        (
            "POST",
            "/nodes/pve1/vzdump".into(),
            vec![
                ("vmid", "500"),
                ("storage", "local"),
                ("mode", "stop"),
                ("compress", "zstd"),
                ("notes-template", "{{guestname}}"),
                ("prune-backups", "keep-last=2"),
            ],
        ),
        ("GET", "/nodes/pve1/lxc".into(), vec![]),
        (
            "POST",
            "/nodes/pve1/lxc".into(),
            vec![
                ("vmid", "600"),
                (
                    "ostemplate",
                    "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
                ),
                ("hostname", "ct600"),
                ("rootfs", "local-lvm:2"),
                ("net0", "name=eth0,bridge=vmbr0,ip=dhcp"),
                ("start", "1"),
            ],
        ),
        ("GET", "/nodes/pve1/lxc/600/config".into(), vec![]),
        ("GET", "/nodes/pve1/lxc/600/status/current".into(), vec![]),
        ("GET", "/nodes/pve1/lxc/600/snapshot".into(), vec![]),
        ("GET", "/nodes/pve1/lxc/600/interfaces".into(), vec![]),
        (
            "GET",
            "/nodes/pve1/network".into(),
            vec![("type", "any_bridge")],
        ),
        ("POST", "/nodes/pve1/qemu/500/status/suspend".into(), vec![]),
        ("POST", "/nodes/pve1/qemu/500/status/resume".into(), vec![]),
        ("POST", "/nodes/pve1/qemu/500/status/reset".into(), vec![]),
        (
            "POST",
            "/nodes/pve1/qemu/500/status/reboot".into(),
            vec![("timeout", "30")],
        ),
        (
            "POST",
            "/nodes/pve1/qemu/500/status/shutdown".into(),
            vec![("forceStop", "1")],
        ),
        ("POST", "/nodes/pve1/qemu/500/status/stop".into(), vec![]),
        (
            "DELETE",
            "/nodes/pve1/qemu/500".into(),
            vec![("purge", "1"), ("destroy-unreferenced-disks", "1")],
        ),
        (
            "GET",
            "/nodes/pve1/tasks".into(),
            vec![("vmid", "100"), ("source", "all")],
        ),
        ("GET", format!("/nodes/pve1/tasks/{upid_e}/status"), vec![]),
        (
            "GET",
            format!("/nodes/pve1/tasks/{upid_e}/log"),
            vec![("start", "0"), ("limit", "10")],
        ),
        ("DELETE", format!("/nodes/pve1/tasks/{upid_e}"), vec![]),
        (
            "GET",
            "/nodes/pve1/storage".into(),
            vec![("format", "1"), ("content", "iso")],
        ),
        (
            "GET",
            "/nodes/pve1/storage/local/content".into(),
            vec![("content", "iso")],
        ),
        (
            "DELETE",
            format!(
                "/nodes/pve1/storage/local/content/{}",
                enc("local:iso/rhcos-live.x86_64.iso")
            ),
            vec![],
        ),
        (
            "POST",
            "/pools".into(),
            vec![("poolid", "conf"), ("comment", "c")],
        ),
        ("GET", "/pools".into(), vec![]),
        ("GET", "/pools/conf".into(), vec![]),
        ("PUT", "/pools/conf".into(), vec![("vms", "100")]),
        (
            "PUT",
            "/pools".into(),
            vec![("poolid", "conf"), ("vms", "100"), ("delete", "1")],
        ),
        ("DELETE", "/pools/conf".into(), vec![]),
        (
            "POST",
            "/cluster/ha/resources".into(),
            vec![("sid", "vm:100"), ("comment", "c")],
        ),
        (
            "POST",
            "/cluster/ha/resources".into(),
            vec![("sid", "101"), ("state", "stopped")],
        ),
        ("GET", "/cluster/ha/resources".into(), vec![("type", "vm")]),
        ("GET", "/cluster/ha/resources/vm:100".into(), vec![]),
        (
            "PUT",
            "/cluster/ha/resources/vm:100".into(),
            vec![("max_restart", "2")],
        ),
        (
            "POST",
            "/cluster/ha/rules".into(),
            vec![
                ("rule", "conf-rule"),
                ("type", "resource-affinity"),
                ("affinity", "negative"),
                ("resources", "vm:100,vm:101"),
            ],
        ),
        (
            "GET",
            "/cluster/ha/rules".into(),
            vec![("type", "resource-affinity")],
        ),
        ("GET", "/cluster/ha/rules/conf-rule".into(), vec![]),
        (
            "PUT",
            "/cluster/ha/rules/conf-rule".into(),
            vec![("type", "resource-affinity"), ("comment", "c")],
        ),
        ("GET", "/cluster/ha/status/current".into(), vec![]),
        ("GET", "/cluster/ha/status/manager_status".into(), vec![]),
        ("DELETE", "/cluster/ha/rules/conf-rule".into(), vec![]),
        ("DELETE", "/cluster/ha/resources/vm:101".into(), vec![]),
    ];
    let mut covered = std::collections::BTreeSet::new();
    run_cases(&api, &cases, &mut covered);
    // HA groups are PVE 8's (PVE 9 has migrated them to rules).
    let sim8 = common::start_version("8.4.1");
    let api8 = Api::root(&sim8);
    let groups: Vec<Case> = vec![
        (
            "POST",
            "/cluster/ha/groups".into(),
            vec![("group", "conf-group"), ("nodes", "pve1:2,pve2")],
        ),
        ("GET", "/cluster/ha/groups".into(), vec![]),
        ("GET", "/cluster/ha/groups/conf-group".into(), vec![]),
        (
            "PUT",
            "/cluster/ha/groups/conf-group".into(),
            vec![("restricted", "1")],
        ),
        ("DELETE", "/cluster/ha/groups/conf-group".into(), vec![]),
    ];
    run_cases(&api8, &groups, &mut covered);
    // Upload is covered by its own multipart test (tests/behaviour_storage.rs).
    covered.insert((
        "POST".into(),
        "/nodes/{node}/storage/{storage}/upload".into(),
    ));
    covered.insert(("POST".into(), "/access/ticket".into()));
    let all: std::collections::BTreeSet<(String, String)> = methods()
        .iter()
        .map(|d| (d.method.clone(), d.path.clone()))
        .collect();
    let missing: Vec<_> = all.difference(&covered).collect();
    assert!(
        missing.is_empty(),
        "methods without a valid-request case: {missing:?}"
    );
}

/// Sends each case, expects success (a task: `OK`) and records the schema method it covers.
fn run_cases(
    api: &Api,
    cases: &[Case],
    covered: &mut std::collections::BTreeSet<(String, String)>,
) {
    for (m, path, params) in cases {
        let r = send(api, m, path, params);
        assert_eq!(r.status, 200, "{m} {path}: {:?}", r.body);
        assert!(r.body.get("data").is_some(), "{m} {path}: no data envelope");
        if let Some(upid) = r.data().as_str().filter(|s| s.starts_with("UPID:")) {
            assert_eq!(api.exit(upid), "OK", "{m} {path}: {:?}", api.task_log(upid));
        }
        // Map the concrete path back to its schema method.
        let found = methods().into_iter().find(|d| {
            d.method == *m && {
                let t: Vec<&str> = d.path.split('/').collect();
                let c: Vec<&str> = path.split('/').collect();
                t.len() == c.len() && t.iter().zip(&c).all(|(a, b)| a.starts_with('{') || a == b)
            }
        });
        covered.insert((m.to_string(), found.expect("known method").path.clone()));
    }
}

#[test]
fn unknown_paths_and_methods_are_501() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.get("/nodes/pve1/qemu/100/foo", &[]);
    assert_eq!(r.status, 501);
    assert_eq!(
        r.message(),
        "Method 'GET /nodes/pve1/qemu/100/foo' not implemented\n"
    );
    let r = api.delete("/version", &[]);
    assert_eq!(r.status, 501);
}
