//! What goes over the wire, checked against a scripted HTTP/1.1 server: auth headers, CSRF, form and
//! query encoding, reason-phrase errors (old PVE), 595, retries and task waiting.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pve_client::{Backoff, Client, ConnectionOptions, Error, Params};

type Log = Arc<Mutex<Vec<String>>>;

/// Serve `replies` (status, reason, body) one connection each, recording every request's text.
fn serve(replies: Vec<(u16, &'static str, String)>) -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let log: Log = Arc::default();
    let log2 = log.clone();
    std::thread::spawn(move || {
        for (status, reason, body) in replies {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                head.push_str(&line);
                if line == "\r\n" || line.is_empty() {
                    break;
                }
            }
            let mut body_in = vec![0u8; len];
            reader.read_exact(&mut body_in).unwrap();
            head.push_str(&String::from_utf8_lossy(&body_in));
            log2.lock().unwrap().push(head);
            let mut s = stream;
            write!(
                s,
                "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json;charset=UTF-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            s.flush().unwrap();
        }
    });
    (base, log)
}

fn token_opts(base: &str) -> ConnectionOptions {
    let mut o = ConnectionOptions::new(base);
    o.api_user = Some("ansible@pve".into());
    o.api_token_id = Some("ci".into());
    o.api_token_secret = Some("0000-canary-secret".into());
    o
}

fn quick() -> Backoff {
    Backoff {
        attempts: 3,
        initial: Duration::from_millis(5),
        max: Duration::from_millis(5),
        factor: 1,
    }
}

#[test]
fn token_header_and_old_generation_not_found() {
    let (base, log) = serve(vec![(
        500,
        "Configuration file 'nodes/pve1/qemu-server/123.conf' does not exist",
        r#"{"data":null}"#.into(),
    )]);
    let c = Client::new(&token_opts(&base)).unwrap();
    let e = c
        .vm_config("pve1", 123, true)
        .expect_err("the VM does not exist");
    assert!(e.is_not_found(), "{e}");
    assert!(e.to_string().contains("123.conf' does not exist"), "{e}");
    let req = log.lock().unwrap()[0].clone();
    assert!(
        req.starts_with("GET /api2/json/nodes/pve1/qemu/123/config?current=1 HTTP/1.1"),
        "{req}"
    );
    assert!(
        req.contains("authorization: PVEAPIToken=ansible@pve!ci=0000-canary-secret"),
        "{req}"
    );
    assert!(!req.to_lowercase().contains("csrfpreventiontoken"), "{req}");
}

#[test]
fn ticket_login_csrf_on_writes_and_form_booleans() {
    let login = r#"{"data":{"username":"root@pam","ticket":"PVE:root@pam:66343A23::sig","CSRFPreventionToken":"66343A23:csrf"}}"#;
    let (base, log) = serve(vec![
        (200, "OK", login.into()),
        (200, "OK", r#"{"data":{"name":"a"}}"#.into()),
        (200, "OK", r#"{"data":null}"#.into()),
        (200, "OK", r#"{"data":null}"#.into()),
    ]);
    let mut o = ConnectionOptions::new(&base);
    o.api_user = Some("root@pam".into());
    o.api_password = Some("canary-pw".into());
    let c = Client::connect(&o).unwrap();
    assert_eq!(
        c.session_ticket().as_deref(),
        Some("PVE:root@pam:66343A23::sig")
    );
    c.get("/nodes/pve1/qemu/101/config", &Params::new())
        .unwrap();
    c.put(
        "/nodes/pve1/qemu/101/config",
        &Params::new()
            .flag("onboot", true)
            .set("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
    )
    .unwrap();
    c.delete(
        "/nodes/pve1/qemu/101",
        &Params::new()
            .flag("purge", true)
            .flag("destroy-unreferenced-disks", true),
    )
    .unwrap();
    let log = log.lock().unwrap();
    assert!(
        log[0].starts_with("POST /api2/json/access/ticket"),
        "{}",
        log[0]
    );
    assert!(
        log[0].ends_with("username=root%40pam&password=canary-pw"),
        "{}",
        log[0]
    );
    assert!(log[1].contains("cookie: PVEAuthCookie=PVE:root@pam:66343A23::sig"));
    assert!(!log[1].to_lowercase().contains("csrfpreventiontoken"));
    assert!(
        log[2]
            .to_lowercase()
            .contains("csrfpreventiontoken: 66343a23:csrf"),
        "{}",
        log[2]
    );
    assert!(
        log[2].ends_with("onboot=1&net0=virtio%3DBC%3A24%3A11%3A00%3A00%3A01%2Cbridge%3Dvmbr0"),
        "{}",
        log[2]
    );
    assert!(
        log[3].starts_with(
            "DELETE /api2/json/nodes/pve1/qemu/101?purge=1&destroy-unreferenced-disks=1 HTTP/1.1"
        ),
        "{}",
        log[3]
    );
    assert!(
        !log[3].to_lowercase().contains("content-length"),
        "{}",
        log[3]
    );
}

#[test]
fn wrong_password_is_a_clear_error() {
    let (base, _) = serve(vec![(
        401,
        "authentication failure",
        r#"{"data":null}"#.into(),
    )]);
    let mut o = ConnectionOptions::new(&base);
    o.api_user = Some("root@pam".into());
    o.api_password = Some("wrong".into());
    let e = Client::connect(&o).unwrap_err().to_string();
    assert!(
        e.contains("login as 'root@pam' failed: authentication failure"),
        "{e}"
    );
}

#[test]
fn transient_errors_are_retried_and_595_names_the_node() {
    let (base, log) = serve(vec![
        (503, "Service Unavailable", "".into()),
        (
            500,
            "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout",
            r#"{"data":null}"#.into(),
        ),
        (
            200,
            "OK",
            r#"{"data":"UPID:pve1:00001ED0:00035693:66343A23:qmconfig:101:root@pam:"}"#.into(),
        ),
        (
            595,
            "Errors during connection establishment, proxy handshake: No route to host",
            "".into(),
        ),
    ]);
    let c = Client::new(&token_opts(&base))
        .unwrap()
        .with_backoff(quick());
    let v = c
        .post(
            "/nodes/pve1/qemu/101/config",
            &Params::new().set("cores", 4),
        )
        .unwrap();
    assert!(v.as_str().unwrap().starts_with("UPID:pve1"));
    assert_eq!(log.lock().unwrap().len(), 3);
    let e = c.vm_status("pve3", 101).unwrap_err();
    assert!(
        matches!(&e, Error::NodeUnreachable { node, .. } if node == "pve3"),
        "{e}"
    );
    assert!(!e.is_not_found());
}

/// A gateway error (502/503/504 from a proxy in front of PVE) is retried for a GET and an
/// ordinary write, never for a create or clone (`post_once`): it may have taken effect.
#[test]
fn gateway_errors_are_retried_except_for_creates_and_clones() {
    let page = || "<html><head><title>502 Bad Gateway</title></head></html>".to_string();
    let (base, log) = serve(vec![
        (502, "Bad Gateway", page()),
        (200, "OK", r#"{"data":{"version":"9.2.11"}}"#.into()),
        (504, "Gateway Time-out", page()),
    ]);
    let c = Client::new(&token_opts(&base))
        .unwrap()
        .with_backoff(quick());
    assert_eq!(c.version().unwrap()["version"], "9.2.11");
    let e = c
        .create_vm(
            "pve1",
            &Params::new().set("vmid", 4100),
            Duration::from_secs(1),
        )
        .unwrap_err();
    assert!(e.is_gateway_error() && e.status() == Some(504), "{e}");
    let sent = log.lock().unwrap().clone();
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(sent[2].starts_with("POST /api2/json/nodes/pve1/qemu "));
}

#[test]
fn failed_task_carries_exit_status_and_log_tail() {
    let upid = "UPID:pve2:00001ED0:00035693:66343A23:qmcreate:101:root@pam:";
    let (base, log) = serve(vec![
        (200, "OK", r#"{"data":{"status":"running"}}"#.into()),
        (
            200,
            "OK",
            r#"{"data":{"status":"stopped","exitstatus":"unable to create VM 101 - unsupported format 'qcow2'"}}"#.into(),
        ),
        (
            200,
            "OK",
            r#"{"data":[{"n":1,"t":"allocating"},{"n":2,"t":"TASK ERROR: unable to create VM 101 - unsupported format 'qcow2'"}],"total":2}"#.into(),
        ),
    ]);
    let c = Client::new(&token_opts(&base))
        .unwrap()
        .with_poll_interval(Duration::from_millis(5));
    let e = c.wait_task(upid, Duration::from_secs(10)).unwrap_err();
    let Error::Task(t) = &e else { panic!("{e}") };
    assert_eq!(t.node, "pve2");
    assert_eq!(t.kind, "qmcreate");
    assert!(t.log_tail.last().unwrap().contains("TASK ERROR"));
    let log = log.lock().unwrap();
    assert!(
        log[0].starts_with(&format!("GET /api2/json/nodes/pve2/tasks/{upid}/status")),
        "{}",
        log[0]
    );
}

#[test]
fn expired_ticket_is_renewed_once() {
    let login = |n: u8| {
        format!(
            r#"{{"data":{{"ticket":"PVE:root@pam:0000000{n}::sig","CSRFPreventionToken":"0000000{n}:csrf"}}}}"#
        )
    };
    let (base, log) = serve(vec![
        (200, "OK", login(1)),
        (401, "No ticket", r#"{"data":null}"#.into()),
        (200, "OK", login(2)),
        (200, "OK", r#"{"data":{"version":"9.2.11"}}"#.into()),
    ]);
    let mut o = ConnectionOptions::new(&base);
    o.api_user = Some("root@pam".into());
    o.api_password = Some("canary-pw".into());
    let c = Client::connect(&o).unwrap();
    assert_eq!(c.version().unwrap()["version"], "9.2.11");
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 4);
    assert!(log[1].contains("PVEAuthCookie=PVE:root@pam:00000001::sig"));
    assert!(log[2].starts_with("POST /api2/json/access/ticket"));
    assert!(
        log[3].contains("PVEAuthCookie=PVE:root@pam:00000002::sig"),
        "{}",
        log[3]
    );
}
