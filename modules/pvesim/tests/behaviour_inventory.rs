//! Reads an inventory client makes besides the VM list (community.proxmox's inventory
//! plugin): containers per node, a node's network interfaces and a VM's snapshot list.

mod common;

use common::{start, start_seed, Api, CI_TOKEN};
use pvesim::model::NetIfaceSeed;
use pvesim::Seed;
use serde_json::json;

/// `GET /nodes/{node}/network` (pve-manager `Network.pm` `index`): a fresh install's `vmbr0` over
/// `eno1` by default, the seed's interfaces otherwise; `active` only on an interface that is up, a
/// `cidr` split into `address`/`netmask`, and the `type` filter (`any_bridge`: bridges of either kind).
#[test]
fn node_network_lists_the_interfaces_with_their_addresses() {
    let mut seed = Seed::lab();
    seed.nodes[1].network = Some(vec![
        NetIfaceSeed {
            iface: "vmbr0".into(),
            kind: "bridge".into(),
            active: false,
            cidr: Some("10.9.0.12/24".into()),
            gateway: Some("10.9.0.1".into()),
            bridge_ports: Some("eno2".into()),
        },
        NetIfaceSeed {
            iface: "eno2".into(),
            kind: "eth".into(),
            active: true,
            cidr: None,
            gateway: None,
            bridge_ports: None,
        },
    ]);
    let sim = start_seed(seed);
    let api = Api::root(&sim);
    let default = api.get("/nodes/pve1/network", &[]);
    let default = default.ok().as_array().unwrap().clone();
    let vmbr0 = default
        .iter()
        .find(|i| i["iface"] == "vmbr0")
        .expect("vmbr0");
    assert_eq!(
        (
            &vmbr0["type"],
            &vmbr0["address"],
            &vmbr0["netmask"],
            &vmbr0["cidr"],
            &vmbr0["gateway"],
            &vmbr0["active"]
        ),
        (
            &json!("bridge"),
            &json!("192.0.2.11"),
            &json!("24"),
            &json!("192.0.2.11/24"),
            &json!("192.0.2.1"),
            &json!(1)
        )
    );
    let own = api.get("/nodes/pve2/network", &[("type", "any_bridge")]);
    let own = own.ok().as_array().unwrap().clone();
    assert_eq!(own.len(), 1, "{own:?}");
    assert_eq!(own[0]["address"], json!("10.9.0.12"));
    assert!(
        own[0].get("active").is_none(),
        "a down interface has no `active`: {own:?}"
    );
    let eth = api.get("/nodes/pve2/network", &[("type", "eth")]);
    assert_eq!(eth.ok()[0]["iface"], json!("eno2"));
}

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
