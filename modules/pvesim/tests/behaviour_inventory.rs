//! Reads an inventory client makes besides the VM list (community.proxmox's inventory
//! plugin): containers per node with their config, status and interfaces, a node's network
//! interfaces and a VM's snapshot list.

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

/// The lab with two containers: 200 running on pve1 (in pool `ct`, tagged), 201 stopped on pve2.
fn ct_seed() -> Seed {
    let mut seed = Seed::lab();
    let yaml = r#"
cts:
  - vmid: 200
    node: pve1
    running: true
    ips: {net0: ["10.2.0.5/24", "fd00::5/64"]}
    config: {hostname: web-ct, memory: 1024, swap: 256, cores: 2, ostype: debian, arch: amd64,
             tags: "web;proxshift-sno", rootfs: "local-lvm:vm-200-disk-0,size=8G",
             net0: "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:AA:00:01,ip=dhcp,type=veth"}
  - vmid: 201
    node: pve2
    config: {hostname: db-ct, rootfs: "local-lvm:vm-201-disk-0,size=4G"}
pools:
  - {poolid: ct, vms: [200]}
"#;
    let extra = Seed::from_yaml(yaml).unwrap();
    seed.cts = extra.cts;
    seed.pools = extra.pools;
    seed
}

/// Containers (pve-container `LXC.pm` `vmlist`, `PVE::LXC::vmstatus`): listed per node with
/// `type: lxc`, the hostname as `name`, `maxmem`/`maxswap`/`maxdisk` from `memory`, `swap` and the
/// rootfs size; `/cluster/resources` lists them as `lxc/<vmid>` beside the VMs (also with
/// `type=vm`), with their pool; config, `status/current`, snapshots and, while running, interfaces.
#[test]
fn containers_are_listed_with_config_status_and_interfaces() {
    let sim = start_seed(ct_seed());
    let api = Api::root(&sim);
    let pve1 = api.get("/nodes/pve1/lxc", &[]).ok().clone();
    let ct = &pve1.as_array().unwrap()[0];
    assert_eq!(pve1.as_array().unwrap().len(), 1);
    assert_eq!(
        (
            &ct["vmid"],
            &ct["name"],
            &ct["type"],
            &ct["status"],
            &ct["cpus"],
            &ct["tags"]
        ),
        (
            &json!(200),
            &json!("web-ct"),
            &json!("lxc"),
            &json!("running"),
            &json!(2),
            &json!("web;proxshift-sno")
        )
    );
    assert_eq!(
        (&ct["maxmem"], &ct["maxswap"], &ct["maxdisk"]),
        (
            &json!(1024u64 << 20),
            &json!(256u64 << 20),
            &json!(8u64 << 30)
        )
    );
    let stopped = api.get("/nodes/pve2/lxc", &[]).ok()[0].clone();
    assert_eq!(
        (&stopped["name"], &stopped["status"], &stopped["cpus"]),
        (&json!("db-ct"), &json!("stopped"), &json!(32))
    );
    assert_eq!(api.get("/nodes/pve3/lxc", &[]).ok(), &json!([]));

    for ty in [None, Some("vm")] {
        let q: Vec<(&str, &str)> = ty.map(|t| vec![("type", t)]).unwrap_or_default();
        let all = api.get("/cluster/resources", &q).ok().clone();
        let r = all
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["vmid"] == 200)
            .expect("CT 200 listed")
            .clone();
        assert_eq!(
            (&r["id"], &r["type"], &r["node"], &r["pool"]),
            (
                &json!("lxc/200"),
                &json!("lxc"),
                &json!("pve1"),
                &json!("ct")
            )
        );
        assert_eq!(r["maxcpu"], 2);
    }

    let cfg = api.get("/nodes/pve1/lxc/200/config", &[]).ok().clone();
    assert_eq!(
        (&cfg["hostname"], &cfg["memory"], &cfg["cores"]),
        (&json!("web-ct"), &json!(1024), &json!(2))
    );
    assert!(cfg["digest"].as_str().is_some_and(|d| d.len() == 40));
    let status = api
        .get("/nodes/pve1/lxc/200/status/current", &[])
        .ok()
        .clone();
    assert_eq!(
        (&status["status"], &status["type"], &status["ha"]["managed"]),
        (&json!("running"), &json!("lxc"), &json!(0))
    );
    let snaps = api.get("/nodes/pve1/lxc/200/snapshot", &[]).ok().clone();
    assert_eq!(snaps.as_array().unwrap().len(), 1);
    assert_eq!(snaps[0]["name"], "current");
    let ifaces = api.get("/nodes/pve1/lxc/200/interfaces", &[]).ok().clone();
    assert_eq!(
        ifaces,
        json!([
            {"name": "lo", "hwaddr": "00:00:00:00:00:00", "inet": "127.0.0.1/8", "inet6": "::1/128"},
            {"name": "eth0", "hwaddr": "bc:24:11:aa:00:01", "inet": "10.2.0.5/24", "inet6": "fd00::5/64"}
        ])
    );
    assert_eq!(
        api.get("/nodes/pve2/lxc/201/interfaces", &[]).status,
        500,
        "a stopped CT has none"
    );

    // A container is not a VM: the qemu routes do not know it, and the reverse.
    let r = api.get("/nodes/pve1/qemu/200/config", &[]);
    assert_eq!(
        (r.status, r.message()),
        (
            500,
            "Configuration file 'nodes/pve1/qemu-server/200.conf' does not exist\n"
        )
    );
    let r = api.get("/nodes/pve1/lxc/100/config", &[]);
    assert_eq!(
        (r.status, r.message()),
        (
            500,
            "Configuration file 'nodes/pve1/lxc/100.conf' does not exist\n"
        )
    );
    // proxyto node: an unknown node is a hostname lookup failure, as for qemu.
    let r = api.get("/nodes/nope/lxc", &[]);
    assert_eq!(r.status, 500);
    assert!(r.message().starts_with("hostname lookup 'nope' failed"));
    // VM.Audit on /vms/<vmid> is what the index needs (the CI token has it through /vms).
    let ci = Api::token(&sim, CI_TOKEN);
    assert_eq!(
        ci.get("/nodes/pve1/lxc", &[])
            .ok()
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// VMIDs are one space (pve-cluster `check_vmid_unused`): `/cluster/nextid` skips and refuses a
/// container's, a VM create on it fails with `CT <vmid> already exists on node '<node>'`, and a
/// container create (`vzcreate`) on a VM's fails with the `VM` wording; a container create
/// allocates its rootfs and writes upstream's defaults.
#[test]
fn vmids_are_shared_by_vms_and_containers() {
    let mut seed = ct_seed();
    seed.cluster.nextid_lower = 200;
    assert!(seed.add_file(
        "pve1",
        "local",
        "vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
        120 << 20
    ));
    let sim = start_seed(seed);
    let api = Api::root(&sim);
    assert_eq!(api.get("/cluster/nextid", &[]).ok(), &json!("202"));
    let r = api.get("/cluster/nextid", &[("vmid", "201")]);
    assert_eq!(r.status, 400);
    assert!(
        r.body.to_string().contains("VM 201 already exists"),
        "{:?}",
        r.body
    );
    let r = api.post(
        "/nodes/pve1/qemu",
        &[("vmid", "200"), ("name", "clash"), ("memory", "1024")],
    );
    assert_eq!(r.status, 500);
    assert_eq!(
        r.message(),
        "unable to create VM 200 - CT 200 already exists on node 'pve1'\n"
    );
    let tpl = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";
    let r = api.post("/nodes/pve1/lxc", &[("vmid", "100"), ("ostemplate", tpl)]);
    assert_eq!(
        (r.status, r.message()),
        (500, "VM 100 already exists on node 'pve1'\n")
    );
    let r = api.post(
        "/nodes/pve1/lxc",
        &[("vmid", "210"), ("ostemplate", tpl), ("storage", "local")],
    );
    assert_eq!(
        r.status, 400,
        "local holds no container directories: {:?}",
        r.body
    );
    let upid = api
        .post(
            "/nodes/pve1/lxc",
            &[
                ("vmid", "210"),
                ("ostemplate", tpl),
                ("rootfs", "local-lvm:2"),
                ("net0", "name=eth0,bridge=vmbr0,ip=dhcp"),
                ("start", "1"),
            ],
        )
        .upid();
    assert!(upid.contains(":vzcreate:210:"), "{upid}");
    assert_eq!(api.exit(&upid), "OK");
    let cfg = api.get("/nodes/pve1/lxc/210/config", &[]).ok().clone();
    assert_eq!(
        (
            &cfg["hostname"],
            &cfg["memory"],
            &cfg["swap"],
            &cfg["ostype"]
        ),
        (&json!("CT210"), &json!(512), &json!(512), &json!("debian"))
    );
    assert_eq!(cfg["rootfs"], json!("local-lvm:vm-210-disk-0,size=2G"));
    assert!(
        cfg["net0"].as_str().unwrap().contains("hwaddr=BC:24:11:"),
        "{cfg}"
    );
    assert_eq!(
        api.get("/nodes/pve1/lxc/210/status/current", &[]).ok()["status"],
        "running"
    );
    assert_eq!(api.get("/cluster/nextid", &[]).ok(), &json!("202"));
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
