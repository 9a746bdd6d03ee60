//! pve-client against the Proxmox simulator: both auth modes, both error-body generations, 595,
//! tasks, lock waiting and ISO upload.

use std::time::Duration;

use pve_client::{Client, ConnectionOptions, Error, Params};
use pvesim::{Fault, SimHandle, Simulator};

const ROOT_TOKEN: &str = "5e1e0c5a-7d2b-4c4e-9a51-000000000001";

fn token_client(sim: &SimHandle) -> Client {
    let mut o = ConnectionOptions::new(sim.url());
    o.api_token_id = Some("root@pam!pvesim".into());
    o.api_token_secret = Some(ROOT_TOKEN.into());
    Client::new(&o)
        .unwrap()
        .with_poll_interval(Duration::from_millis(20))
}

#[test]
fn ticket_auth_reads_and_writes_with_csrf() {
    let sim = Simulator::start(pvesim::lab::config_under_test()).unwrap();
    let mut o = ConnectionOptions::new(sim.url());
    o.api_user = Some("root@pam".into());
    o.api_password = Some("pvesim-root-password".into());
    let c = Client::connect(&o).unwrap();
    assert!(c.session_ticket().unwrap().starts_with("PVE:root@pam:"));
    let cfg = c.vm_config("pve2", 101, false).unwrap();
    assert_eq!(cfg["name"], "spare");
    // A write with the ticket needs the CSRF header; the simulator enforces it like PVE.
    let t = c
        .update_config(
            "pve2",
            101,
            &Params::new().set("cores", 2),
            Duration::from_secs(10),
        )
        .unwrap();
    assert!(t.unwrap().upid.contains(":qmconfig:101:root@pam:"));
    assert_eq!(sim.vm_config(101).unwrap()["cores"], "2");

    o.api_password = Some("wrong".into());
    let e = Client::connect(&o).unwrap_err().to_string();
    assert!(e.contains("login as 'root@pam' failed"), "{e}");
}

#[test]
fn an_ageing_ticket_is_renewed_with_itself_and_outlives_the_first() {
    let sim = Simulator::start(pvesim::lab::config_under_test()).unwrap();
    let mut o = ConnectionOptions::new(sim.url());
    o.api_user = Some("root@pam".into());
    o.api_password = Some("pvesim-root-password".into());
    let c = Client::connect(&o)
        .unwrap()
        .with_ticket_renewal_after(Duration::ZERO);
    let first = c.session_ticket().unwrap();
    // 90 minutes on, with the password changed meanwhile: only a renewal that presents the ticket
    // itself (as PVE allows) can still log in.
    sim.advance(Duration::from_secs(90 * 60));
    sim.with_sim(|s| {
        s.access.users.get_mut("root@pam").unwrap().password = Some("rotated".into());
    });
    assert_eq!(c.vm_config("pve2", 101, false).unwrap()["name"], "spare");
    let renewed = c.session_ticket().unwrap();
    assert_ne!(renewed, first);
    // Another 90 minutes: the first ticket is past its 2 h, the renewed one is not.
    sim.advance(Duration::from_secs(90 * 60));
    assert_eq!(c.vm_config("pve2", 101, false).unwrap()["name"], "spare");
    let logins: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.path == "/access/ticket")
        .map(|r| r.status)
        .collect();
    assert_eq!(
        logins,
        vec![200, 200, 200],
        "connect + two renewals, none refused"
    );
    assert!(sim.requests().iter().all(|r| r.status != 401));
}

#[test]
fn both_error_generations_and_unreachable_nodes() {
    let sim = Simulator::start(pvesim::lab::config_under_test()).unwrap();
    let c = token_client(&sim);
    let e = c.vm_config("pve1", 4242, false).unwrap_err();
    assert!(e.is_not_found(), "{e}");
    let mut opts = sim.options();
    opts.error_message = false;
    sim.set_options(opts);
    let e = c.vm_config("pve1", 4242, false).unwrap_err();
    assert!(e.is_not_found(), "old generation (reason phrase only): {e}");
    assert!(e.to_string().contains("4242.conf"), "{e}");

    let e = c
        .post(
            "/nodes/pve1/qemu",
            &Params::new().set("vmid", 4300).set("memory", "lots"),
        )
        .unwrap_err();
    let Error::Api(a) = &e else { panic!("{e}") };
    assert_eq!(a.status, 400);
    assert!(a.errors.contains_key("memory"), "{e}");

    sim.inject(Fault::NodeOffline {
        node: "pve3".into(),
        offline: true,
    })
    .unwrap();
    let e = c.storages("pve3").unwrap_err();
    assert!(
        matches!(&e, Error::NodeUnreachable { node, status: 595, .. } if node == "pve3"),
        "{e}"
    );
    assert!(!c
        .nodes()
        .unwrap()
        .iter()
        .find(|n| n.node == "pve3")
        .unwrap()
        .online());
}

#[test]
fn tasks_locks_and_vmids() {
    let sim = Simulator::start(pvesim::lab::config_under_test()).unwrap();
    let c = token_client(&sim);
    assert!(!c.vmid_is_free(100).unwrap());
    assert!(c.vmid_is_free(4444).unwrap());
    let next = c.next_id().unwrap();
    assert!(next >= 100);

    sim.inject(Fault::FailTasks {
        kind: "qmcreate".into(),
        vmid: None,
        count: 1,
        message: "unable to create VM 4444 - out of space".into(),
    })
    .unwrap();
    let e = c
        .create_vm(
            "pve1",
            &Params::new().set("vmid", 4444).set("memory", 512),
            Duration::from_secs(10),
        )
        .unwrap_err();
    let Error::Task(t) = &e else { panic!("{e}") };
    assert_eq!(t.kind, "qmcreate");
    assert!(t.exitstatus.contains("out of space"));
    assert!(t.log_tail.iter().any(|l| l.contains("TASK ERROR")), "{t:?}");

    sim.inject(Fault::StaleLock {
        vmid: 101,
        lock: "backup".into(),
    })
    .unwrap();
    let e = c
        .wait_unlocked("pve2", 101, Duration::from_millis(100))
        .unwrap_err()
        .to_string();
    assert!(e.contains("VM 101 is locked (backup)"), "{e}");
    let cfg = c
        .wait_unlocked("pve1", 100, Duration::from_secs(1))
        .unwrap();
    assert_eq!(cfg["name"], "bastion");
}

#[test]
fn iso_upload_with_checksum() {
    let sim = Simulator::start(pvesim::lab::config_under_test()).unwrap();
    let c = token_client(&sim);
    let dir = std::env::temp_dir().join(format!("pve-client-upload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("x.iso");
    std::fs::write(&f, vec![1u8; 10_000]).unwrap();
    let sum = pve_client::sha256_file(&f).unwrap();
    c.upload_iso(
        "pve2",
        "local",
        &f,
        "agent-test.iso",
        Some(&sum),
        Duration::from_secs(30),
    )
    .unwrap();
    let content = c.storage_content("pve2", "local", Some("iso")).unwrap();
    let v = content
        .iter()
        .find(|v| v.volid == "local:iso/agent-test.iso")
        .expect("uploaded");
    assert_eq!(v.size, 10_000);
    let e = c
        .upload_iso(
            "pve2",
            "local-lvm",
            &f,
            "agent-test.iso",
            None,
            Duration::from_secs(30),
        )
        .unwrap_err();
    assert!(e.to_string().contains("lvmthin"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `delete_volume`: the `imgdel` task is waited for; a volume already gone is a task with
/// warnings, not an error; a missing storage is `is_not_found`, a missing privilege a 403.
#[test]
fn delete_volume_waits_for_imgdel_and_an_absent_volume_is_no_error() {
    let sim = Simulator::start(pvesim::lab::config_under_test()).unwrap();
    let c = token_client(&sim);
    let t = Duration::from_secs(10);
    let volid = "local:iso/rhcos-live.x86_64.iso";
    let done = c.delete_volume("pve1", volid, t).unwrap().unwrap();
    assert!(done.upid.contains(":imgdel:local:"), "{done:?}");
    assert_eq!(done.exitstatus, "OK");
    let left = c.storage_content("pve1", "local", Some("iso")).unwrap();
    assert!(left.iter().all(|v| v.volid != volid), "{left:?}");
    let again = c.delete_volume("pve1", volid, t).unwrap().unwrap();
    assert_eq!(again.exitstatus, "WARNINGS: 1");
    let e = c.delete_volume("pve1", "nope:iso/x.iso", t).unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    let mut o = ConnectionOptions::new(sim.url());
    o.api_token_id = Some("ansible@pve!ci".into());
    o.api_token_secret = pvesim::lab::CI_TOKEN
        .split_once('=')
        .map(|(_, secret)| secret.to_string());
    let ci = Client::new(&o).unwrap();
    let e = ci
        .delete_volume("pve1", "local:iso/agent.x86_64.iso", t)
        .unwrap_err();
    assert_eq!(e.status(), Some(403), "{e:?}");
}

#[test]
fn ha_resources_rules_and_status_round_trip() {
    let sim = Simulator::start(pvesim::lab::config_under_test()).unwrap();
    let c = token_client(&sim);
    let nine = pvesim::lab::release_under_test().major >= 9;
    c.ha_resource_create("vm:100", &Params::new().set("comment", "proxshift"))
        .unwrap();
    c.ha_resource_create("vm:101", &Params::new().set("state", "stopped"))
        .unwrap();
    let res = c.ha_resources().unwrap();
    assert_eq!(res.len(), 2);
    assert_eq!(res[0].comment.as_deref(), Some("proxshift"));
    c.ha_resource_update("vm:100", &Params::new().set("comment", "x"))
        .unwrap();
    let services = c.ha_services().unwrap();
    assert_eq!(services[0].sid, "vm:100");
    assert_eq!(services[0].state.as_deref(), Some("started"));
    if nine {
        let neg = Params::new()
            .set("affinity", "negative")
            .set("resources", "vm:100,vm:101");
        c.ha_rule_create("apart", "resource-affinity", &neg)
            .unwrap();
        let rules = c.ha_rules().unwrap();
        assert_eq!(rules[0].vmids(), [100, 101].into_iter().collect());
        c.ha_rule_update(
            "apart",
            "resource-affinity",
            &Params::new().set("comment", "c"),
        )
        .unwrap();
        assert_eq!(c.ha_rules().unwrap()[0].comment.as_deref(), Some("c"));
        c.ha_rule_delete("apart").unwrap();
        assert!(c.ha_rules().unwrap().is_empty());
    } else {
        assert_eq!(c.ha_rules().unwrap_err().status(), Some(501));
        c.ha_group_create("g1", "pve1:2,pve2", &Params::new().flag("restricted", true))
            .unwrap();
        assert!(c.ha_groups().unwrap()[0].restricted);
        c.ha_group_update("g1", &Params::new().flag("nofailback", true))
            .unwrap();
        c.ha_group_delete("g1").unwrap();
    }
    c.ha_resource_delete("vm:101", true).unwrap();
    assert_eq!(c.ha_resources().unwrap().len(), 1);
}
