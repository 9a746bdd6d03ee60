//! Reads an inventory client makes besides the VM list (community.proxmox's inventory
//! plugin): containers per node and a VM's snapshot list.

mod common;

use common::{start, Api, CI_TOKEN};
use serde_json::json;

#[test]
fn lxc_list_is_empty_on_every_node() {
    let sim = start();
    let api = Api::root(&sim);
    for node in ["pve1", "pve2", "pve3"] {
        assert_eq!(api.get(&format!("/nodes/{node}/lxc"), &[]).ok(), &json!([]));
    }
    // proxyto node: an unknown node is a hostname lookup failure, as for qemu.
    let r = api.get("/nodes/nope/lxc", &[]);
    assert_eq!(r.status, 500);
    assert!(r.message().starts_with("hostname lookup 'nope' failed"));
}

#[test]
fn snapshot_list_has_only_current() {
    let sim = start();
    let api = Api::root(&sim);
    // VM 100 runs in the lab seed, 101 does not.
    let digest = api.get("/nodes/pve1/qemu/100/config", &[]).ok()["digest"].clone();
    assert_eq!(
        api.get("/nodes/pve1/qemu/100/snapshot", &[]).ok(),
        &json!([{"name": "current", "digest": digest, "running": 1, "description": "You are here!"}])
    );
    let list = api.get("/nodes/pve2/qemu/101/snapshot", &[]);
    assert_eq!(list.ok()[0]["running"], 0);
    assert_eq!(list.ok().as_array().unwrap().len(), 1);
    // A VM that is not on this node: qemu-server's load_config error.
    let r = api.get("/nodes/pve1/qemu/101/snapshot", &[]);
    assert_eq!(r.status, 500);
    assert_eq!(
        r.message(),
        "Configuration file 'nodes/pve1/qemu-server/101.conf' does not exist\n"
    );
    // VM.Audit on the VM is required.
    let ci = Api::token(&sim, CI_TOKEN);
    assert_eq!(ci.get("/nodes/pve1/qemu/100/snapshot", &[]).status, 200);
}
