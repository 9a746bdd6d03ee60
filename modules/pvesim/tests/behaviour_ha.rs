//! HA: resources, rules (PVE 9) and groups (PVE 8) as pve-ha-manager's API serves them, `vm.ha`
//! following the resources, and a node failure: fencing after a delay, then recovery onto a node
//! the rules allow, or `recovery` when none does.

mod common;

use std::time::Duration;

use common::{start, start_version, Api};
use pvesim::faults::Fault;
use pvesim::SimHandle;
use serde_json::Value;

/// Creates and starts VM `vmid` on `node` (stopped lab VMs would not show HA starting them).
fn vm(api: &Api, node: &str, vmid: u32) {
    let id = vmid.to_string();
    let upid = api
        .post(
            &format!("/nodes/{node}/qemu"),
            &[("vmid", &id), ("memory", "1024"), ("start", "1")],
        )
        .upid();
    assert_eq!(api.exit(&upid), "OK");
}

fn service(api: &Api, vmid: u32) -> Value {
    let status = api.get("/cluster/ha/status/current", &[]).ok().clone();
    status
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["sid"] == format!("vm:{vmid}"))
        .cloned()
        .unwrap_or(Value::Null)
}

fn kill(sim: &SimHandle, node: &str, offline: bool) {
    sim.inject(Fault::NodeOffline {
        node: node.into(),
        offline,
    })
    .unwrap();
}

#[test]
fn resources_follow_the_api_and_vm_status() {
    let sim = start();
    let api = Api::root(&sim);
    vm(&api, "pve1", 201);
    let r = api.post("/cluster/ha/resources", &[("sid", "vm:999")]);
    assert!(
        r.message()
            .contains("resource 'vm:999' does not exist in cluster"),
        "{:?}",
        r.body
    );
    api.post(
        "/cluster/ha/resources",
        &[("sid", "vm:201"), ("comment", "proxshift")],
    )
    .ok();
    let dup = api.post("/cluster/ha/resources", &[("sid", "201")]);
    assert!(
        dup.message()
            .contains("resource ID 'vm:201' already defined"),
        "{:?}",
        dup.body
    );
    let got = api.get("/cluster/ha/resources/vm:201", &[]).ok().clone();
    assert_eq!(
        (got["state"].as_str(), got["comment"].as_str()),
        (Some("started"), Some("proxshift"))
    );
    let st = api
        .get("/nodes/pve1/qemu/201/status/current", &[])
        .ok()
        .clone();
    assert_eq!(st["ha"]["managed"], 1);
    assert_eq!(st["ha"]["state"], "started");

    // Destroying an HA VM needs purge; a stop goes through the HA stack.
    let r = api.delete("/nodes/pve1/qemu/201", &[]);
    assert!(
        r.message().contains("purge parameter not set"),
        "{:?}",
        r.body
    );
    api.put("/cluster/ha/resources/vm:201", &[("state", "stopped")])
        .ok();
    let st = api
        .get("/nodes/pve1/qemu/201/status/current", &[])
        .ok()
        .clone();
    assert_eq!(
        (st["status"].as_str(), st["ha"]["state"].as_str()),
        (Some("stopped"), Some("stopped"))
    );
    api.delete("/cluster/ha/resources/vm:201", &[]).ok();
    let st = api
        .get("/nodes/pve1/qemu/201/status/current", &[])
        .ok()
        .clone();
    assert_eq!(st["ha"]["managed"], 0);
    let r = api.delete("/cluster/ha/resources/vm:201", &[]);
    assert!(r.message().contains("not managed by HA"), "{:?}", r.body);
}

#[test]
fn rules_are_validated_as_upstream() {
    let sim = start();
    let api = Api::root(&sim);
    for (node, vmid) in [("pve1", 201), ("pve2", 202), ("pve3", 203), ("pve1", 204)] {
        vm(&api, node, vmid);
    }
    let r = api.post(
        "/cluster/ha/rules",
        &[
            ("rule", "cp"),
            ("type", "resource-affinity"),
            ("affinity", "negative"),
            ("resources", "vm:201,vm:202"),
        ],
    );
    assert!(
        r.message()
            .contains("cannot use unmanaged resource(s) vm:201, vm:202."),
        "{:?}",
        r.body
    );
    for v in ["vm:201", "vm:202", "vm:203", "vm:204"] {
        api.post("/cluster/ha/resources", &[("sid", v)]).ok();
    }
    let one = api.post(
        "/cluster/ha/rules",
        &[
            ("rule", "one"),
            ("type", "resource-affinity"),
            ("affinity", "negative"),
            ("resources", "vm:201"),
        ],
    );
    assert_eq!(one.status, 400, "{:?}", one.body);
    assert!(
        one.error("resources").contains("less than two resources"),
        "{:?}",
        one.body
    );
    let many = api.post(
        "/cluster/ha/rules",
        &[
            ("rule", "many"),
            ("type", "resource-affinity"),
            ("affinity", "negative"),
            ("resources", "vm:201,vm:202,vm:203,vm:204"),
        ],
    );
    assert!(
        many.error("resources")
            .contains("more resources than available nodes"),
        "{:?}",
        many.body
    );
    api.post(
        "/cluster/ha/rules",
        &[
            ("rule", "cp"),
            ("type", "resource-affinity"),
            ("affinity", "negative"),
            ("resources", "vm:201,vm:202,vm:203"),
            ("comment", "proxshift"),
        ],
    )
    .ok();
    let both = api.post(
        "/cluster/ha/rules",
        &[
            ("rule", "pair"),
            ("type", "resource-affinity"),
            ("affinity", "positive"),
            ("resources", "vm:201,vm:202"),
        ],
    );
    assert!(
        both.error("resources")
            .contains("shares two or more resources"),
        "{:?}",
        both.body
    );
    let r = api.post(
        "/cluster/ha/rules",
        &[
            ("rule", "pin"),
            ("type", "node-affinity"),
            ("resources", "vm:204"),
            ("nodes", "pve9"),
        ],
    );
    assert!(
        r.message()
            .contains("cannot use non-existant node(s) pve9."),
        "{:?}",
        r.body
    );
    let dup = api.post(
        "/cluster/ha/rules",
        &[
            ("rule", "cp"),
            ("type", "resource-affinity"),
            ("affinity", "negative"),
            ("resources", "vm:201,vm:204"),
        ],
    );
    assert!(
        dup.message().contains("HA rule 'cp' already defined"),
        "{:?}",
        dup.body
    );

    let rule = api.get("/cluster/ha/rules/cp", &[]).ok().clone();
    assert_eq!(rule["resources"], "vm:201,vm:202,vm:203");
    assert_eq!(
        (rule["affinity"].as_str(), rule["comment"].as_str()),
        (Some("negative"), Some("proxshift"))
    );
    let digest = rule["digest"].as_str().unwrap().to_string();
    api.put(
        "/cluster/ha/rules/cp",
        &[
            ("type", "resource-affinity"),
            ("resources", "vm:201,vm:202"),
            ("digest", &digest),
        ],
    )
    .ok();
    let stale = api.put(
        "/cluster/ha/rules/cp",
        &[
            ("type", "resource-affinity"),
            ("comment", "x"),
            ("digest", &digest),
        ],
    );
    assert!(
        stale.message().contains("detected modified configuration"),
        "{:?}",
        stale.body
    );
    let listed = api
        .get("/cluster/ha/rules", &[("resource", "vm:202")])
        .ok()
        .clone();
    assert_eq!(listed.as_array().unwrap().len(), 1);

    // A purged resource leaves the rules; a rule left empty goes.
    api.delete("/cluster/ha/resources/vm:201", &[]).ok();
    assert_eq!(
        api.get("/cluster/ha/rules/cp", &[]).ok()["resources"],
        "vm:202"
    );
    api.delete("/cluster/ha/rules/cp", &[]).ok();
    api.delete("/cluster/ha/rules/cp", &[]).ok();
    assert!(api
        .get("/cluster/ha/rules/cp", &[])
        .message()
        .contains("no such ha rule 'cp'"));
}

#[test]
fn a_lost_node_is_fenced_then_its_services_recover_apart() {
    let sim = start();
    let api = Api::root(&sim);
    for (node, vmid) in [("pve1", 201), ("pve2", 202)] {
        vm(&api, node, vmid);
        api.post("/cluster/ha/resources", &[("sid", &vmid.to_string())])
            .ok();
    }
    api.post(
        "/cluster/ha/rules",
        &[
            ("rule", "cp"),
            ("type", "resource-affinity"),
            ("affinity", "negative"),
            ("resources", "vm:201,vm:202"),
        ],
    )
    .ok();
    kill(&sim, "pve1", true);
    // Not instant: the CRM fences first.
    assert_eq!(service(&api, 201)["state"], "fence");
    assert_eq!(service(&api, 201)["node"], "pve1");
    let ms = api
        .get("/cluster/ha/status/manager_status", &[])
        .ok()
        .clone();
    assert_eq!(ms["manager_status"]["node_status"]["pve1"], "fence");
    sim.advance(Duration::from_secs(2));
    let s = service(&api, 201);
    assert_eq!(
        (s["node"].as_str(), s["state"].as_str()),
        (Some("pve3"), Some("started")),
        "{s}"
    );
    let st = api
        .get("/nodes/pve3/qemu/201/status/current", &[])
        .ok()
        .clone();
    assert_eq!(st["status"], "running");
    assert_eq!(service(&api, 202)["node"], "pve2", "its partner stays");
}

#[test]
fn a_service_with_no_allowed_node_waits_in_recovery_until_one_comes_back() {
    let sim = start();
    let api = Api::root(&sim);
    for (node, vmid) in [("pve1", 201), ("pve2", 202), ("pve3", 203)] {
        vm(&api, node, vmid);
        api.post("/cluster/ha/resources", &[("sid", &vmid.to_string())])
            .ok();
    }
    api.post(
        "/cluster/ha/rules",
        &[
            ("rule", "cp"),
            ("type", "resource-affinity"),
            ("affinity", "negative"),
            ("resources", "vm:201,vm:202,vm:203"),
        ],
    )
    .ok();
    kill(&sim, "pve3", true);
    assert_eq!(service(&api, 203)["state"], "fence");
    sim.advance(Duration::from_secs(2));
    let s = service(&api, 203);
    assert_eq!(
        (s["node"].as_str(), s["state"].as_str()),
        (Some("pve3"), Some("recovery")),
        "{s}"
    );
    kill(&sim, "pve3", false);
    let s = service(&api, 203);
    assert_eq!(
        (s["node"].as_str(), s["state"].as_str()),
        (Some("pve3"), Some("started")),
        "{s}"
    );
    let nodes: Vec<Value> = [201, 202, 203]
        .iter()
        .map(|v| service(&api, *v)["node"].clone())
        .collect();
    assert_eq!(nodes, ["pve1", "pve2", "pve3"]);
}

#[test]
fn a_node_back_before_its_fence_keeps_its_services() {
    let sim = start();
    let api = Api::root(&sim);
    vm(&api, "pve1", 201);
    api.post("/cluster/ha/resources", &[("sid", "vm:201")]).ok();
    kill(&sim, "pve1", true);
    assert_eq!(service(&api, 201)["state"], "fence");
    kill(&sim, "pve1", false);
    sim.advance(Duration::from_secs(5));
    let s = service(&api, 201);
    assert_eq!(
        (s["node"].as_str(), s["state"].as_str()),
        (Some("pve1"), Some("started")),
        "{s}"
    );
}

#[test]
fn pve8_has_groups_and_no_rules_pve9_refuses_groups() {
    let sim = start_version("8.4.1");
    let api = Api::root(&sim);
    let r = api.get("/cluster/ha/rules", &[]);
    assert_eq!(r.status, 501, "{:?}", r.body);
    vm(&api, "pve1", 201);
    api.post(
        "/cluster/ha/groups",
        &[
            ("group", "g1"),
            ("nodes", "pve1:2,pve2"),
            ("restricted", "1"),
        ],
    )
    .ok();
    let dup = api.post("/cluster/ha/groups", &[("group", "g1"), ("nodes", "pve1")]);
    assert!(
        dup.message().contains("ha group ID 'g1' already defined"),
        "{:?}",
        dup.body
    );
    api.post(
        "/cluster/ha/resources",
        &[("sid", "vm:201"), ("group", "g1")],
    )
    .ok();
    let g = api.get("/cluster/ha/groups/g1", &[]).ok().clone();
    assert_eq!(
        (g["nodes"].as_str(), g["restricted"].as_u64()),
        (Some("pve1:2,pve2"), Some(1))
    );
    let r = api.delete("/cluster/ha/groups/g1", &[]);
    assert!(
        r.message().contains("ha group is used by service 'vm:201'"),
        "{:?}",
        r.body
    );
    // Restricted to pve1 and pve2: pve1 lost, the service goes to pve2 (pve3 is emptier).
    kill(&sim, "pve1", true);
    api.get("/cluster/ha/status/current", &[]).ok();
    sim.advance(Duration::from_secs(2));
    assert_eq!(service(&api, 201)["node"], "pve2");

    let sim9 = start();
    let api9 = Api::root(&sim9);
    let r = api9.get("/cluster/ha/groups", &[]);
    assert!(
        r.message()
            .contains("ha groups have been migrated to rules"),
        "{:?}",
        r.body
    );
    vm(&api9, "pve1", 201);
    let r = api9.post(
        "/cluster/ha/resources",
        &[("sid", "vm:201"), ("group", "g1")],
    );
    assert!(
        r.error("group").contains("migrated to rules"),
        "{:?}",
        r.body
    );
}

/// Where the CRM has `vmid` after one more round.
fn node_of(api: &Api, vmid: u32) -> String {
    service(api, vmid)["node"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn pve8_groups_send_a_recovered_service_home_unless_nofailback() {
    let sim = start_version("8.4.1");
    let api = Api::root(&sim);
    for (group, nodes, nofailback) in [
        ("g201", "pve1:2,pve3:1", "0"),
        ("g202", "pve2:2,pve3:1", "1"),
    ] {
        api.post(
            "/cluster/ha/groups",
            &[
                ("group", group),
                ("nodes", nodes),
                ("nofailback", nofailback),
            ],
        )
        .ok();
    }
    for (node, vmid) in [("pve1", 201), ("pve2", 202)] {
        vm(&api, node, vmid);
        let sid = format!("vm:{vmid}");
        let group = format!("g{vmid}");
        api.post("/cluster/ha/resources", &[("sid", &sid), ("group", &group)])
            .ok();
    }
    // pve1 lost: 201 is recovered onto pve3 (priority 1) rather than pve2 (not in its group).
    kill(&sim, "pve1", true);
    api.get("/cluster/ha/status/current", &[]).ok();
    sim.advance(Duration::from_secs(2));
    assert_eq!(node_of(&api, 201), "pve3");
    // pve1 back: the next round migrates 201 home, still running.
    kill(&sim, "pve1", false);
    assert_eq!(node_of(&api, 201), "pve1");
    assert_eq!(service(&api, 201)["state"], "started");
    let st = api
        .get("/nodes/pve1/qemu/201/status/current", &[])
        .ok()
        .clone();
    assert_eq!(st["status"], "running", "{st}");
    // nofailback: 202 stays on pve3 once pve2 is back.
    kill(&sim, "pve2", true);
    api.get("/cluster/ha/status/current", &[]).ok();
    sim.advance(Duration::from_secs(2));
    assert_eq!(node_of(&api, 202), "pve3");
    kill(&sim, "pve2", false);
    sim.advance(Duration::from_secs(2));
    assert_eq!(node_of(&api, 202), "pve3");
    // A running service given a group that prefers another node is migrated there.
    api.post(
        "/cluster/ha/groups",
        &[("group", "g202b"), ("nodes", "pve2:2")],
    )
    .ok();
    api.put("/cluster/ha/resources/vm:202", &[("group", "g202b")])
        .ok();
    assert_eq!(node_of(&api, 202), "pve2");
}

#[test]
fn destroying_an_ha_vm_with_purge_drops_it_from_resources_and_rules() {
    let sim = start();
    let api = Api::root(&sim);
    for (node, vmid) in [("pve1", 201), ("pve2", 202), ("pve3", 203)] {
        vm(&api, node, vmid);
        api.post("/cluster/ha/resources", &[("sid", &vmid.to_string())])
            .ok();
    }
    api.post(
        "/cluster/ha/rules",
        &[
            ("rule", "cp"),
            ("type", "resource-affinity"),
            ("affinity", "negative"),
            ("resources", "vm:201,vm:202,vm:203"),
        ],
    )
    .ok();
    api.put("/cluster/ha/resources/vm:203", &[("state", "stopped")])
        .ok();
    let upid = api.delete("/nodes/pve3/qemu/203", &[("purge", "1")]).upid();
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(
        api.get("/cluster/ha/rules/cp", &[]).ok()["resources"],
        "vm:201,vm:202"
    );
    let sids: Vec<Value> = api
        .get("/cluster/ha/resources", &[])
        .ok()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["sid"].clone())
        .collect();
    assert_eq!(sids, ["vm:201", "vm:202"]);
}
