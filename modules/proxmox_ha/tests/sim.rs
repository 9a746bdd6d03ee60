//! proxmox_ha against the in-process Proxmox simulator: a cluster `c1` of three control-plane VMs
//! (201–203, one per node) and two workers (204 on pve1, 205 on pve2); 206 is cluster c2's. Check mode sends no write,
//! a second run changes nothing, a node failure keeps the control plane apart, scale-in and
//! `absent` remove only what the module created; on PVE 8 one group per VM keeps the sets apart.

use std::time::Duration;

use module_testkit::TestModule;
use pvesim::{Fault, SimHandle, Simulator};
use serde_json::{json, Value};

const TOKEN: &str = "5e1e0c5a-7d2b-4c4e-9a51-000000000001";

const VMS: &str = r#"
vms:
  - {vmid: 201, node: pve1, running: true, config: {name: c1-master-0, memory: "1024", tags: "proxshift;proxshift-c1"}}
  - {vmid: 202, node: pve2, running: true, config: {name: c1-master-1, memory: "1024", tags: "proxshift;proxshift-c1"}}
  - {vmid: 203, node: pve3, running: true, config: {name: c1-master-2, memory: "1024", tags: "proxshift;proxshift-c1"}}
  - {vmid: 204, node: pve1, running: true, config: {name: c1-worker-0, memory: "1024", tags: "proxshift;proxshift-c1"}}
  - {vmid: 205, node: pve2, running: true, config: {name: c1-worker-1, memory: "1024", tags: "proxshift;proxshift-c1"}}
  - {vmid: 206, node: pve3, running: true, config: {name: other, memory: "1024", tags: "proxshift;proxshift-c2"}}
"#;

fn sim(version: &str) -> SimHandle {
    let mut seed = pvesim::lab::seed_under_test();
    seed.cluster.version = version.into();
    seed.vms
        .extend(pvesim::Seed::from_yaml(VMS).expect("vm seed").vms);
    Simulator::start(pvesim::Config::with_seed(seed)).expect("simulator starts")
}

fn module(sim: &SimHandle, mut args: Value) -> Value {
    args["api_host"] = json!(sim.url());
    args["api_token_id"] = json!("root@pam!pvesim");
    args["api_token_secret"] = json!(TOKEN);
    args["validate_certs"] = json!(false);
    args["cluster"] = json!("c1");
    TestModule::new("proxmox_ha", proxmox_ha::argument_spec(), proxmox_ha::run)
        .hiding(TOKEN)
        .run(&args)
        .0
}

fn cp() -> Value {
    json!(["c1-master-0", "c1-master-1", "203"])
}

/// `(node, state)` of each service, by vmid.
fn services(sim: &SimHandle) -> Vec<(u32, String, String)> {
    sim.with_sim(|s| {
        s.ha.resources
            .iter()
            .map(|(v, r)| (*v, s.vms[v].node.clone(), r.service.as_str().to_string()))
            .collect()
    })
}

#[test]
fn present_is_predicted_applied_and_idempotent() {
    let sim = sim("9.2.11");
    let r = module(
        &sim,
        json!({"control_plane": cp(), "_ansible_check_mode": true, "_ansible_diff": true}),
    );
    assert_eq!(r["changed"], json!(true), "{r:#}");
    assert!(
        r["msg"].as_str().unwrap().starts_with("would add vm:201"),
        "{r:#}"
    );
    assert_eq!(
        r["diff"]["after"]["rules"]["proxshift-c1-control-plane"],
        "vm:201,vm:202,vm:203"
    );
    assert_eq!(r["diff"]["before"]["resources"], json!({}));
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());

    let r = module(&sim, json!({"control_plane": cp()}));
    assert_eq!(r["changed"], json!(true), "{r:#}");
    assert_eq!(r["actions"].as_array().unwrap().len(), 7, "{r:#}");
    assert_eq!(r["ha"]["rules"]["proxshift-c1-workers"], "vm:204,vm:205");
    sim.with_sim(|s| {
        assert_eq!(s.ha.resources.len(), 5, "206 is another cluster's");
        assert_eq!(
            s.ha.resources[&201].comment.as_deref(),
            Some("proxshift:c1")
        );
    });
    let r = module(&sim, json!({"control_plane": cp()}));
    assert_eq!(r["changed"], json!(false), "{r:#}");
    assert!(
        r["msg"].as_str().unwrap().contains("is as wanted (5 VMs)"),
        "{r:#}"
    );

    let r = module(&sim, json!({"control_plane": ["nope"]}));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("control_plane names [\"nope\"]"),
        "{r:#}"
    );
}

#[test]
fn a_lost_node_keeps_the_control_plane_apart_and_it_comes_back() {
    let sim = sim("9.2.11");
    module(&sim, json!({"control_plane": cp()}));
    node_offline(&sim, "pve1", true);
    sim.with_sim(|s| s.tick());
    assert!(services(&sim)
        .iter()
        .any(|(v, _, st)| *v == 201 && st == "fence"));
    sim.advance(Duration::from_secs(300));
    let s = services(&sim);
    // The worker moves to the only node without its partner; the master has none and waits.
    assert!(s.contains(&(204, "pve3".into(), "started".into())), "{s:?}");
    assert!(
        s.contains(&(201, "pve1".into(), "recovery".into())),
        "{s:?}"
    );
    let masters: Vec<&String> = s
        .iter()
        .filter(|(v, _, st)| *v <= 203 && st == "started")
        .map(|(_, n, _)| n)
        .collect();
    assert_eq!(
        masters,
        ["pve2", "pve3"],
        "never two masters on one node: {s:?}"
    );
    node_offline(&sim, "pve1", false);
    sim.with_sim(|s| s.tick());
    let s = services(&sim);
    assert!(s.contains(&(201, "pve1".into(), "started".into())), "{s:?}");
    // The rules still hold what the module wants: nothing to do.
    let r = module(&sim, json!({"control_plane": cp()}));
    assert_eq!(r["changed"], json!(false), "{r:#}");
}

#[test]
fn scale_in_and_absent_remove_only_what_it_created() {
    let sim = sim("9.2.11");
    // Someone else's HA resource on a cluster VM.
    sim.with_sim(|s| {
        s.ha_add(
            205,
            pvesim::ha::HaResource::new(pvesim::ha::Requested::Started),
        )
    });
    let r = module(&sim, json!({"control_plane": cp()}));
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("vm:205 is an HA resource proxshift did not create"),
        "{r:#}"
    );
    assert_eq!(
        r["ha"]["rules"]["proxshift-c1-workers"], "vm:204,vm:205",
        "naming it is fine"
    );
    // Scale in: worker 204 leaves the cluster (its tag removed).
    sim.with_sim(|s| {
        s.vms
            .get_mut(&204)
            .unwrap()
            .conf
            .insert("tags".into(), "other".into());
    });
    let r = module(&sim, json!({"control_plane": cp(), "_ansible_diff": true}));
    assert_eq!(
        r["actions"],
        json!(["remove vm:204", "remove rule proxshift-c1-workers"]),
        "{r:#}"
    );
    assert_eq!(r["diff"]["before"]["resources"]["vm:204"], "started");
    let r = module(&sim, json!({"state": "absent"}));
    assert_eq!(r["changed"], json!(true), "{r:#}");
    sim.with_sim(|s| {
        assert_eq!(
            s.ha.resources.keys().copied().collect::<Vec<_>>(),
            [205],
            "the foreign one stays"
        );
        assert!(s.ha.rules.is_empty());
        assert!(
            s.vms[&201].running(),
            "deleting an HA resource leaves the VM running"
        );
    });
    let r = module(&sim, json!({"state": "absent"}));
    assert_eq!(r["changed"], json!(false), "{r:#}");
}

/// Takes `node` offline (or brings it back), as pvesim's `node_offline` fault does.
fn node_offline(sim: &SimHandle, node: &str, offline: bool) {
    let node = node.into();
    sim.inject(Fault::NodeOffline { node, offline }).unwrap();
}

/// The module's warnings but the one about `validate_certs=false`.
fn ha_warnings(r: &Value) -> Vec<String> {
    r["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|w| !w.starts_with("validate_certs"))
        .map(str::to_string)
        .collect()
}

/// `vmid`'s node once the HA manager has had time for a fence and a recovery.
fn node_after_a_while(sim: &SimHandle, vmid: u32) -> String {
    sim.with_sim(|s| s.tick());
    sim.advance(Duration::from_secs(300));
    sim.with_sim(|s| s.vms[&vmid].node.clone())
}

#[test]
fn pve8_groups_keep_the_control_plane_apart_through_a_node_failure() {
    // A fourth Proxmox node: a spare for the control plane.
    let sim = {
        let mut seed = pvesim::lab::seed_under_test();
        seed.cluster.version = "8.4.1".into();
        let mut pve4 = seed.nodes[2].clone();
        pve4.name = "pve4".into();
        seed.nodes.push(pve4);
        seed.vms
            .extend(pvesim::Seed::from_yaml(VMS).expect("vm seed").vms);
        Simulator::start(pvesim::Config::with_seed(seed)).expect("simulator starts")
    };
    let r = module(&sim, json!({"control_plane": cp(), "_ansible_diff": true}));
    assert_eq!(r["changed"], json!(true), "{r:#}");
    assert!(ha_warnings(&r).is_empty(), "a spare node: no warning {r:#}");
    assert_eq!(
        r["ha"]["groups"]["proxshift-c1-201"],
        json!({"nodes": "pve1:2,pve4:1", "resources": "vm:201"})
    );
    assert_eq!(r["diff"]["before"]["groups"], json!({}));
    sim.with_sim(|s| {
        assert_eq!(
            s.ha.resources[&204].group.as_deref(),
            Some("proxshift-c1-204")
        );
        assert_eq!(
            s.ha.groups["proxshift-c1-204"].comment.as_deref(),
            Some("proxshift:c1")
        );
    });
    assert!(sim
        .requests()
        .iter()
        .all(|q| !q.path.starts_with("/cluster/ha/rules")));
    let r = module(&sim, json!({"control_plane": cp()}));
    assert_eq!(r["changed"], json!(false), "{r:#}");

    // pve1 is lost: its master goes to the spare, never beside another master; it comes home
    // when pve1 is back, and the groups still hold what the module wants.
    node_offline(&sim, "pve1", true);
    assert_eq!(node_after_a_while(&sim, 201), "pve4");
    let masters: Vec<String> = services(&sim)
        .into_iter()
        .filter(|(v, _, st)| *v <= 203 && st == "started")
        .map(|(_, n, _)| n)
        .collect();
    assert_eq!(masters, ["pve4", "pve2", "pve3"], "{:?}", services(&sim));
    let r = module(&sim, json!({"control_plane": cp()}));
    assert_eq!(r["changed"], json!(false), "the home stays pve1: {r:#}");
    node_offline(&sim, "pve1", false);
    assert_eq!(node_after_a_while(&sim, 201), "pve1");
    // The second failure of the same node goes the same way.
    node_offline(&sim, "pve1", true);
    assert_eq!(node_after_a_while(&sim, 201), "pve4");
    node_offline(&sim, "pve1", false);
    assert_eq!(node_after_a_while(&sim, 201), "pve1");

    // Scale in to one worker: 204 leaves its group before the groups go.
    sim.with_sim(|s| {
        s.vms
            .get_mut(&205)
            .unwrap()
            .conf
            .insert("tags".into(), "other".into());
    });
    let r = module(&sim, json!({"control_plane": cp()}));
    assert_eq!(
        r["actions"],
        json!([
            "update vm:204 (no group)",
            "remove vm:205",
            "remove group proxshift-c1-204",
            "remove group proxshift-c1-205"
        ]),
        "{r:#}"
    );
    let r = module(&sim, json!({"state": "absent"}));
    assert_eq!(r["changed"], json!(true), "{r:#}");
    sim.with_sim(|s| assert!(s.ha.resources.is_empty() && s.ha.groups.is_empty()));
}

#[test]
fn pve8_on_as_many_nodes_as_masters_warns_and_fails_back() {
    let sim = sim("8.4.1");
    let r = module(
        &sim,
        json!({"control_plane": cp(), "spread_workers": false}),
    );
    assert!(
        r["warnings"].to_string().contains("with no spare node"),
        "{r:#}"
    );
    assert_eq!(r["ha"]["groups"]["proxshift-c1-202"]["nodes"], "pve2:2");
    assert_eq!(r["ha"]["groups"].as_object().unwrap().len(), 3, "{r:#}");
    // pve2 is lost: PVE 8 cannot keep its master waiting, it runs beside another until
    // pve2 is back, then goes home.
    node_offline(&sim, "pve2", true);
    assert_ne!(node_after_a_while(&sim, 202), "pve2");
    node_offline(&sim, "pve2", false);
    assert_eq!(node_after_a_while(&sim, 202), "pve2");
    let r = module(
        &sim,
        json!({"control_plane": cp(), "spread_workers": false}),
    );
    assert_eq!(r["changed"], json!(false), "{r:#}");
    assert!(
        ha_warnings(&r).is_empty(),
        "warned once, when the groups were made: {r:#}"
    );
}
