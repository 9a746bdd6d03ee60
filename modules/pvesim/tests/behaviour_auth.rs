//! Transport and authentication: tickets, CSRF, tokens (privsep), ACL 403s, 401 texts,
//! body rules, error-body generations, offline nodes and quorum.

mod common;

use std::time::Duration;

use common::{raw, start, start_with, Api, Auth, CI_TOKEN, ROOT_PASSWORD, ROOT_TOKEN};
use pvesim::{Fault, Options};
use serde_json::json;

#[test]
fn no_credentials_is_no_ticket() {
    let sim = start();
    let anon = Api::new(&sim, Auth::None);
    let r = anon.get("/version", &[]);
    assert_eq!(r.status, 401);
    assert_eq!(r.message(), "No ticket\n");
    let resp = raw(
        &sim,
        "GET /api2/json/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(resp.starts_with("HTTP/1.1 401 No ticket\r\n"), "{resp}");
}

#[test]
fn wrong_token_or_password_is_401() {
    let sim = start();
    let bad = Api::token(&sim, "root@pam!pvesim=00000000-0000-0000-0000-000000000000");
    let r = bad.get("/version", &[]);
    assert_eq!(r.status, 401);
    assert_eq!(r.message(), "Authentication failed!\n");
    assert!(Api::login(&sim, "root@pam", "wrong").is_none());
    let anon = Api::new(&sim, Auth::None);
    let r = anon.post(
        "/access/ticket",
        &[("username", "root@pam"), ("password", "wrong")],
    );
    assert_eq!((r.status, r.message()), (401, "authentication failure\n"));
    // The password never lands in the request log.
    let log = serde_json::to_string(&sim.requests()).unwrap();
    assert!(!log.contains("wrong") && !log.contains(ROOT_PASSWORD));
}

#[test]
fn ticket_login_and_csrf_only_for_tickets() {
    let sim = start();
    let api = Api::login(&sim, "root@pam", ROOT_PASSWORD).expect("login");
    let Auth::Ticket { ticket, csrf } = &api.auth else {
        unreachable!()
    };
    assert!(ticket.starts_with("PVE:root@pam:"));
    assert!(csrf.as_ref().unwrap().len() > 10);
    assert_eq!(api.get("/version", &[]).status, 200);
    // Writes with a ticket need the CSRF header.
    let no_csrf = Api::new(
        &sim,
        Auth::Ticket {
            ticket: ticket.clone(),
            csrf: None,
        },
    );
    let r = no_csrf.put("/nodes/pve2/qemu/101/config", &[("cores", "2")]);
    assert_eq!(
        (r.status, r.message()),
        (401, "Permission denied - invalid csrf token\n")
    );
    assert_eq!(
        no_csrf.get("/nodes/pve2/qemu/101/config", &[]).status,
        200,
        "GET needs no CSRF"
    );
    api.put("/nodes/pve2/qemu/101/config", &[("cores", "2")])
        .ok();
    // Tokens never need CSRF.
    Api::root(&sim)
        .put("/nodes/pve2/qemu/101/config", &[("cores", "3")])
        .ok();
    // A realm given separately.
    let anon = Api::new(&sim, Auth::None);
    let r = anon.post(
        "/access/ticket",
        &[
            ("username", "root"),
            ("realm", "pam"),
            ("password", ROOT_PASSWORD),
        ],
    );
    assert_eq!(r.ok()["username"], "root@pam");
    // Renewing with the ticket as password.
    let r = anon.post(
        "/access/ticket",
        &[("username", "root@pam"), ("password", ticket)],
    );
    assert_eq!(r.status, 200);
    // A forged ticket fails.
    let forged = Api::new(
        &sim,
        Auth::Ticket {
            ticket: ticket.replace("root@pam", "ansible@pve"),
            csrf: None,
        },
    );
    assert_eq!(
        forged.get("/version", &[]).message(),
        "authentication failure\n"
    );
}

#[test]
fn ticket_expires_after_two_hours() {
    let sim = start();
    let api = Api::login(&sim, "root@pam", ROOT_PASSWORD).unwrap();
    sim.advance(Duration::from_secs(2 * 3600 + 5));
    assert_eq!(api.get("/version", &[]).status, 401);
}

#[test]
fn acl_permissions_give_403_with_pve_text() {
    let sim = start();
    let auditor = Api::login(&sim, "auditor@pve", "pvesim-auditor-password").unwrap();
    // The lab's auditors group has PVEAuditor on "/": VM.Audit works, VM.PowerMgmt does not.
    assert_eq!(auditor.get("/nodes/pve1/qemu/100/config", &[]).status, 200);
    let r = auditor.post("/nodes/pve1/qemu/100/status/stop", &[]);
    assert_eq!(r.status, 403);
    assert_eq!(
        r.message(),
        "Permission check failed (/vms/100, VM.PowerMgmt)\n"
    );
    let r = auditor.put("/nodes/pve1/qemu/100/config", &[("memory", "4096")]);
    assert_eq!(r.status, 403);
    let r = auditor.post("/nodes/pve1/qemu", &[("vmid", "700")]);
    assert_eq!(
        r.message(),
        "Permission check failed (/vms/700, VM.Allocate)\n"
    );
    assert!(sim.vm_config(700).is_none());
}

#[test]
fn privilege_separated_token_is_limited_to_its_own_acls() {
    let sim = start();
    let ci = Api::token(&sim, CI_TOKEN);
    // ansible@pve has Sys.Audit on "/", the token only under /nodes, /vms, /storage.
    assert_eq!(ci.get("/nodes/pve1/status", &[]).status, 200);
    let r = ci.get("/access/users/ansible@pve/token", &[]);
    assert_eq!(r.status, 403);
    // Per-key config privileges: PVEVMAdmin on /vms covers VM.Config.Disk.
    ci.put("/nodes/pve2/qemu/101/config", &[("scsi1", "local-lvm:1")])
        .ok();
    // Creating disks needs Datastore.AllocateSpace (token has PVEDatastoreUser on /storage).
    let upid = ci
        .post(
            "/nodes/pve1/qemu",
            &[("vmid", "600"), ("scsi0", "local-lvm:1")],
        )
        .upid();
    assert_eq!(ci.exit(&upid), "OK");
    assert!(upid.ends_with(":ansible@pve!ci:"), "{upid}");
    // Remove the token's storage ACL: the user still has it, the intersection does not.
    Api::root(&sim)
        .put(
            "/access/acl",
            &[
                ("path", "/storage"),
                ("roles", "PVEDatastoreUser"),
                ("tokens", "ansible@pve!ci"),
                ("delete", "1"),
            ],
        )
        .ok();
    let r = ci.post(
        "/nodes/pve1/qemu",
        &[("vmid", "601"), ("scsi0", "local-lvm:1")],
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        r.message(),
        "Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)\n"
    );
    // The same user's token without privilege separation has the user's rights.
    let full = Api::token(
        &sim,
        "ansible@pve!full=5e1e0c5a-7d2b-4c4e-9a51-000000000003",
    );
    let upid = full
        .post(
            "/nodes/pve1/qemu",
            &[("vmid", "601"), ("scsi0", "local-lvm:1")],
        )
        .upid();
    assert_eq!(full.exit(&upid), "OK");
}

#[test]
fn tokens_can_be_created_and_used() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.post("/access/users/ansible@pve/token/new", &[("privsep", "0")]);
    let d = r.ok().clone();
    assert_eq!(d["full-tokenid"], "ansible@pve!new");
    assert_eq!(d["info"]["privsep"], 0);
    let secret = d["value"].as_str().unwrap();
    let t = Api::token(&sim, &format!("ansible@pve!new={secret}"));
    assert_eq!(t.get("/nodes/pve1/qemu/100/config", &[]).status, 200);
    let r = api.post("/access/users/ansible@pve/token/new", &[]);
    assert_eq!(
        r.message(),
        "Token 'new' for user 'ansible@pve' already exists.\n"
    );
    api.delete("/access/users/ansible@pve/token/new", &[]).ok();
    assert_eq!(t.get("/version", &[]).status, 401);
}

#[test]
fn body_on_delete_is_501_and_query_works() {
    let sim = start();
    let resp = raw(
        &sim,
        &format!(
            "DELETE /api2/json/nodes/pve2/qemu/101 HTTP/1.1\r\nHost: x\r\nAuthorization: PVEAPIToken={ROOT_TOKEN}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\nConnection: close\r\n\r\npurge=1"
        ),
    );
    assert!(
        resp.starts_with("HTTP/1.1 501 Unexpected content for method 'DELETE'\r\n"),
        "{resp}"
    );
    assert!(sim.vm_config(101).is_some());
    let api = Api::root(&sim);
    let upid = api.delete("/nodes/pve2/qemu/101", &[("purge", "1")]).upid();
    assert_eq!(api.exit(&upid), "OK");
    assert!(sim.vm_config(101).is_none());
}

#[test]
fn old_error_bodies_have_no_message_but_a_reason_phrase() {
    let sim = start_with(Options {
        error_message: false,
        ..Options::default()
    });
    let api = Api::root(&sim);
    let r = api.get("/nodes/pve1/qemu/999/config", &[]);
    assert_eq!(r.status, 500);
    assert_eq!(r.body, json!({"data": null}));
    let resp = raw(
        &sim,
        &format!("GET /api2/json/nodes/pve1/qemu/999/config HTTP/1.1\r\nHost: x\r\nAuthorization: PVEAPIToken={ROOT_TOKEN}\r\nConnection: close\r\n\r\n"),
    );
    assert!(
        resp.starts_with(
            "HTTP/1.1 500 Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist\r\n"
        ),
        "{resp}"
    );
    // Parameter errors still carry `errors`.
    let r = api.post("/nodes/pve1/qemu", &[("vmid", "x")]);
    assert_eq!(
        r.body["errors"]["vmid"],
        "type check ('integer') failed - got 'x'"
    );
    assert!(r.body.get("message").is_none());
}

#[test]
fn auth_failures_are_delayed_when_configured() {
    let sim = start_with(Options {
        auth_failure_delay_ms: 300,
        ..Options::default()
    });
    let anon = Api::new(&sim, Auth::None);
    assert_eq!(anon.get("/version", &[]).status, 401);
    assert_eq!(Api::root(&sim).get("/version", &[]).status, 200);
    // The request log says which answer was held back, and by how much.
    let log: Vec<(u16, u64)> = sim
        .requests()
        .iter()
        .map(|r| (r.status, r.delay_ms))
        .collect();
    assert_eq!(log, [(401, 300), (200, 0)]);
}

#[test]
fn offline_node_answers_595_and_shows_offline() {
    let sim = start();
    let api = Api::root(&sim);
    sim.inject(Fault::NodeOffline {
        node: "pve2".into(),
        offline: true,
    })
    .unwrap();
    let r = api.get("/nodes/pve2/qemu/101/status/current", &[]);
    assert_eq!(r.status, 595);
    assert_eq!(
        r.message(),
        "Errors during connection establishment, proxy handshake: No route to host\n"
    );
    let nodes = api.get("/nodes", &[]).ok().clone();
    let pve2 = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "pve2")
        .unwrap();
    assert_eq!(pve2["status"], "offline");
    assert!(pve2.get("maxmem").is_none());
    let res = api
        .get("/cluster/resources", &[("type", "vm")])
        .ok()
        .clone();
    let vm = res
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vmid"] == 101)
        .unwrap();
    assert_eq!(vm["status"], "unknown");
    // Unknown node names fail the proxy lookup.
    let r = api.get("/nodes/nope/qemu", &[]);
    assert_eq!(r.status, 500);
    assert!(r.message().starts_with("hostname lookup 'nope' failed"));
}

#[test]
fn lost_quorum_blocks_writes() {
    let sim = start_with(Options {
        quorate: false,
        ..Options::default()
    });
    let api = Api::root(&sim);
    let r = api.put("/nodes/pve2/qemu/101/config", &[("cores", "2")]);
    assert_eq!(r.message(), "cluster not ready - no quorum?\n");
    assert_eq!(api.get("/nodes/pve2/qemu/101/config", &[]).status, 200);
}

#[test]
fn conflicting_uri_parameter_is_rejected() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.get("/nodes/pve1/qemu/100/config", &[("vmid", "101")]);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.error("vmid"),
        "duplicate parameter (already defined in URI) with conflicting values!"
    );
}
