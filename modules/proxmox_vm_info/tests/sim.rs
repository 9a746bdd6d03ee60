//! proxmox_vm_info and its inventory backend against the in-process Proxmox simulator (the lab seed:
//! a template, a running VM with the guest agent and an address, a stopped VM; plus a running LXC
//! container): the module body runs through `ansible_module::execute` as the binary does; the
//! request log shows only GETs.

use module_testkit::TestModule;
use pvesim::{SimHandle, Simulator};
use serde_json::{json, Value};

const TOKEN: &str = "5e1e0c5a-7d2b-4c4e-9a51-000000000001";

/// The lab at the release `make test` plays (`PVESIM_PVE_VERSION`, default the newest), with
/// container 300 (`web-ct`, running, an address on eth0) on pve1.
fn sim() -> SimHandle {
    let mut seed = pvesim::lab::seed_under_test();
    seed.cts = pvesim::Seed::from_yaml(
        r#"
cts:
  - vmid: 300
    node: pve1
    running: true
    ips: {net0: ["10.3.0.5/24"]}
    config: {hostname: web-ct, memory: 1024, rootfs: "local-lvm:vm-300-disk-0,size=8G",
             net0: "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:AA:03:00,ip=dhcp"}
"#,
    )
    .expect("container seed")
    .cts;
    Simulator::start(pvesim::Config::with_seed(seed)).expect("simulator starts")
}

fn module(sim: &SimHandle, mut args: Value) -> Value {
    args["api_host"] = json!(sim.url());
    args["api_token_id"] = json!("root@pam!pvesim");
    args["api_token_secret"] = json!(TOKEN);
    args["validate_certs"] = json!(false);
    args["_ansible_check_mode"] = json!(true);
    TestModule::new(
        "proxmox_vm_info",
        proxmox_vm_info::argument_spec(),
        proxmox_vm_info::run,
    )
    .hiding(TOKEN)
    .run(&args)
    .0
}

#[test]
fn lists_and_selects_in_check_mode_with_gets_only() {
    let sim = sim();
    let r = module(&sim, json!({"network": true}));
    let vms = r["vms"].as_array().expect("vms");
    let ids: Vec<u64> = vms.iter().map(|v| v["vmid"].as_u64().unwrap()).collect();
    assert_eq!(
        ids,
        [100, 101],
        "templates and containers are left out: {r:#}"
    );
    assert_eq!(vms[0]["vmtype"], json!("qemu"));
    assert_eq!(vms[0]["ipv4_addresses"], json!(["10.0.0.100"]));
    assert_eq!(vms[0]["config"]["name"], json!("bastion"));
    assert!(
        vms[1].get("agent_interfaces").is_none(),
        "stopped: no agent call"
    );

    let r = module(&sim, json!({"vmid": 9000, "config": false}));
    assert_eq!(r["vms"][0]["template"], json!(true));
    assert!(r["vms"][0].get("config").is_none());
    let r = module(&sim, json!({"name": "spare", "node": "pve1"}));
    assert_eq!(r["vms"], json!([]), "spare is on pve2");
    let r = module(&sim, json!({"vmid": 5}));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("vmid 5 is out of range"),
        "{r}"
    );
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
    assert!(
        !sim.requests()
            .iter()
            .any(|q| q.path.contains("agent") && q.path.contains("/101/")),
        "no agent request for the stopped VM"
    );
}

#[test]
fn inventory_backend_hosts_groups_and_masked_errors() {
    let sim = sim();
    let backend = TestModule::new(
        "proxshift.proxmox.proxmox",
        proxmox_vm_info::inventory::argument_spec(),
        proxmox_vm_info::inventory::run,
    );
    let run = |args: Value| backend.run(&args).0;
    let r = run(
        json!({"url": sim.url(), "token_id": "root@pam!pvesim", "token_secret": TOKEN,
                       "validate_certs": false}),
    );
    assert_eq!(
        r["hosts"]["bastion"]["proxmox_ipv4_addresses"],
        json!(["10.0.0.100"]),
        "{r:#}"
    );
    assert_eq!(
        r["groups"]["proxmox_all_running"],
        json!(["bastion", "web-ct"])
    );
    assert_eq!(r["groups"]["proxmox_pve2_qemu"], json!(["spare"]));
    // The container: its type, groups, flat config and the addresses Proxmox reads from it.
    assert_eq!(r["groups"]["proxmox_all_lxc"], json!(["web-ct"]));
    assert_eq!(r["groups"]["proxmox_pve1_lxc"], json!(["web-ct"]));
    let ct = &r["hosts"]["web-ct"];
    assert_eq!(
        (
            &ct["proxmox_vmtype"],
            &ct["proxmox_vmid"],
            &ct["proxmox_memory"]
        ),
        (&json!("lxc"), &json!(300), &json!(1024))
    );
    assert_eq!(ct["proxmox_ipv4_addresses"], json!(["10.3.0.5"]));
    assert!(r["msg"].as_str().unwrap().contains("1 containers"), "{r}");
    assert!(r["hosts"].get("rhcos-template").is_none());
    // Certificate checking off is said (the plugin shows the backend's warnings, #43 item 6).
    assert!(
        r["warnings"]
            .to_string()
            .contains("certificate is not verified"),
        "{r}"
    );

    let wrong = "5e1e0c5a-7d2b-4c4e-9a51-00000000dead";
    let r = run(
        json!({"url": sim.url(), "token_id": "root@pam!pvesim", "token_secret": wrong,
                       "validate_certs": false}),
    );
    assert_eq!(r["failed"], json!(true), "{r}");
    assert!(!r.to_string().contains(wrong), "{r}");
    assert!(sim.writes().is_empty());
}

/// `validate_certs: false` is said in a warning (#43).
#[test]
fn validate_certs_false_warns() {
    let sim = sim();
    let r = module(&sim, json!({}));
    assert!(
        r["warnings"]
            .to_string()
            .contains("certificate is not verified"),
        "{r}"
    );
}
