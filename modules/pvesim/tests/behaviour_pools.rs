//! Resource pools: creation, membership through create and PUT (move, remove), the `pool` field of
//! /cluster/resources, permissions, and the state dump.

mod common;

use common::{start, start_version, Api, BOTH_VERSIONS, CI_TOKEN};

fn pool_of(api: &Api, vmid: u32) -> Option<String> {
    api.get("/cluster/resources", &[("type", "vm")])
        .ok()
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vmid"] == vmid)
        .and_then(|v| v["pool"].as_str().map(str::to_string))
}

#[test]
fn membership_follows_create_move_and_removal() {
    let sim = start();
    let api = Api::root(&sim);
    api.post("/pools", &[("poolid", "ocp"), ("comment", "clusters")])
        .ok();
    api.post("/pools", &[("poolid", "lab")]).ok();
    let dup = api.post("/pools", &[("poolid", "ocp")]);
    assert_eq!(dup.status, 500);
    assert!(
        dup.message().contains("already exists"),
        "{}",
        dup.message()
    );

    let r = api.post("/nodes/pve1/qemu", &[("vmid", "950"), ("pool", "nope")]);
    assert!(
        r.message().contains("pool 'nope' does not exist"),
        "{:?}",
        r.body
    );
    assert!(
        sim.vm_config(950).is_none(),
        "a refused create leaves no VM"
    );

    let upid = api
        .post("/nodes/pve1/qemu", &[("vmid", "950"), ("pool", "ocp")])
        .upid();
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(pool_of(&api, 950).as_deref(), Some("ocp"));
    let members = api.get("/pools/ocp", &[]).ok().clone();
    assert_eq!(members["comment"], "clusters");
    assert_eq!(members["members"][0]["id"], "qemu/950");
    let listed = api.get("/pools", &[("poolid", "ocp")]).ok().clone();
    assert_eq!(listed[0]["members"][0]["vmid"], 950);

    // Into another pool only with allow-move; both API forms.
    let r = api.put("/pools/lab", &[("vms", "950")]);
    assert!(
        r.message().contains("belongs already to pool 'ocp'"),
        "{:?}",
        r.body
    );
    api.put(
        "/pools",
        &[("poolid", "lab"), ("vms", "950"), ("allow-move", "1")],
    )
    .ok();
    assert_eq!(pool_of(&api, 950).as_deref(), Some("lab"));
    let r = api.put("/pools/ocp", &[("vms", "950"), ("delete", "1")]);
    assert!(r.message().contains("not a pool member"), "{:?}", r.body);
    let r = api.delete("/pools/lab", &[]);
    assert!(r.message().contains("is not empty"), "{:?}", r.body);
    api.put("/pools/lab", &[("vms", "950"), ("delete", "1")])
        .ok();
    assert_eq!(pool_of(&api, 950), None);
    api.delete("/pools/lab", &[]).ok();
    let r = api.put("/pools/ocp", &[("vms", "12345")]);
    assert!(
        r.message().contains("VM 12345 does not exist"),
        "{:?}",
        r.body
    );

    // A destroyed VM leaves its pool; a new VM with the same id does not inherit it.
    api.put("/pools/ocp", &[("vms", "950")]).ok();
    let upid = api.delete("/nodes/pve1/qemu/950", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(
        api.get("/pools/ocp", &[]).ok()["members"],
        serde_json::json!([])
    );
    let upid = api.post("/nodes/pve1/qemu", &[("vmid", "950")]).upid();
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(pool_of(&api, 950), None);
    assert_eq!(sim.dump().pools.len(), 1);
}

#[test]
fn pool_changes_need_pool_allocate() {
    let sim = start();
    Api::root(&sim).post("/pools", &[("poolid", "ocp")]).ok();
    // ansible@pve!ci: VM rights, no Pool.* anywhere.
    let ci = Api::token(&sim, CI_TOKEN);
    let r = ci.put("/pools/ocp", &[("vms", "100")]);
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert!(ci.get("/pools", &[]).ok().as_array().unwrap().is_empty());
}

/// `create_pool` dies inside `lock_user_config(…, "create pool failed")`; PVE 9 (pve-manager
/// 7eadbed6) also wants a pool name that starts with a letter, PVE 8 takes `1lab`.
#[test]
fn pool_creation_errors_per_release() {
    for v in BOTH_VERSIONS {
        let sim = start_version(v);
        let api = Api::root(&sim);
        api.post("/pools", &[("poolid", "ocp")]).ok();
        let dup = api.post("/pools", &[("poolid", "ocp")]);
        assert_eq!(
            (dup.status, dup.message()),
            (500, "create pool failed: pool 'ocp' already exists\n"),
            "PVE {v}"
        );
        let r = api.post("/pools", &[("poolid", "1lab")]);
        if v.starts_with('8') {
            r.ok();
        } else {
            assert_eq!(
                (r.status, r.message()),
                (
                    500,
                    "create pool failed: pool name must start with a letter\n"
                ),
                "PVE {v}"
            );
        }
    }
}
