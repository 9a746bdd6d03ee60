//! Storage listing, content, ISO upload (multipart) and full storages.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{
    agent, enc, realtime, start, start_with, Api, Auth, Resp, CI_TOKEN, ROOT_PASSWORD, ROOT_TOKEN,
};
use pvesim::Fault;
use serde_json::json;
use sha2::Digest;

fn multipart(
    fields: &[(&str, &str)],
    file_field: &str,
    file_name: &str,
    data: &[u8],
) -> (String, Vec<u8>) {
    let boundary = "pvesim-test-boundary-7d2b";
    let mut body = Vec::new();
    for (k, v) in fields {
        body.extend(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n")
                .as_bytes(),
        );
    }
    body.extend(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{file_field}\"; filename=\"{file_name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend(data);
    body.extend(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

fn upload(sim: &pvesim::SimHandle, auth: &str, path: &str, ctype: &str, body: Vec<u8>) -> Resp {
    let r = agent()
        .post(format!("{}{path}", sim.api_url()))
        .header("Authorization", auth)
        .header("Content-Type", ctype)
        .send(&body[..])
        .unwrap();
    let status = r.status().as_u16();
    let body = r.into_body().read_json().unwrap();
    Resp { status, body }
}

#[test]
fn storage_list_reports_formats_and_capacity() {
    let sim = start();
    let api = Api::root(&sim);
    let list = api
        .get("/nodes/pve1/storage", &[("format", "1")])
        .ok()
        .clone();
    let lvm = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["storage"] == "local-lvm")
        .unwrap();
    assert_eq!(lvm["type"], "lvmthin");
    assert_eq!(
        lvm["formats"],
        json!({"default": "raw", "supported": ["raw"]})
    );
    assert_eq!(lvm["content"], "images,rootdir");
    assert_eq!(lvm["total"], 2u64 << 40);
    let local = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["storage"] == "local")
        .unwrap();
    assert_eq!(local["avail"], 80u64 << 30, "seeded free space");
    let iso_only = api
        .get("/nodes/pve1/storage", &[("content", "iso")])
        .ok()
        .clone();
    let ids: Vec<&str> = iso_only
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["storage"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["local", "nfs-shared"]);
    let content = api
        .get("/nodes/pve1/storage/local/content", &[("content", "iso")])
        .ok()
        .clone();
    assert_eq!(content[0]["volid"], "local:iso/agent.x86_64.iso");
    assert_eq!(content[0]["content"], "iso");
    assert_eq!(content[0]["format"], "iso");
}

#[test]
fn iso_upload_creates_a_volume() {
    let sim = start();
    let auth = format!("PVEAPIToken={ROOT_TOKEN}");
    let data = b"CD001 fake iso content".repeat(100);
    let sum = hex(&sha2::Sha256::digest(&data));
    let (ct, body) = multipart(
        &[
            ("content", "iso"),
            ("checksum-algorithm", "sha256"),
            ("checksum", &sum),
        ],
        "filename",
        "agent.x86_64.iso",
        &data,
    );
    let r = upload(&sim, &auth, "/nodes/pve2/storage/local/upload", &ct, body);
    let upid = r.upid();
    assert!(upid.contains(":imgcopy::"), "{upid}");
    let api = Api::root(&sim);
    assert_eq!(api.exit(&upid), "OK");
    let content = api
        .get("/nodes/pve2/storage/local/content", &[("content", "iso")])
        .ok()
        .clone();
    assert_eq!(content[0]["volid"], "local:iso/agent.x86_64.iso");
    assert_eq!(content[0]["size"], data.len());
    // Overwrite silently; wrong checksum fails the task.
    let (ct, body) = multipart(
        &[
            ("content", "iso"),
            ("checksum-algorithm", "sha256"),
            ("checksum", "00ff"),
        ],
        "filename",
        "agent.x86_64.iso",
        &data,
    );
    let upid = upload(&sim, &auth, "/nodes/pve2/storage/local/upload", &ct, body).upid();
    assert_eq!(
        api.exit(&upid),
        format!("checksum mismatch: got '{sum}' != expect '00ff'")
    );
}

/// POSTs `body` over a plain socket in `piece`-byte writes (so the simulator receives many small
/// frames, with delimiters split across them) and returns the answer.
fn upload_in_pieces(
    sim: &pvesim::SimHandle,
    path: &str,
    ctype: &str,
    body: &[u8],
    piece: usize,
) -> Resp {
    let mut s = std::net::TcpStream::connect(sim.addr()).unwrap();
    s.set_nodelay(true).unwrap();
    let head = format!(
        "POST /api2/json{path} HTTP/1.1\r\nHost: {}\r\nAuthorization: PVEAPIToken={ROOT_TOKEN}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        sim.addr(),
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    for p in body.chunks(piece) {
        s.write_all(p).unwrap();
    }
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    let text = String::from_utf8(answer).unwrap();
    let (head, json) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    Resp {
        status,
        body: serde_json::from_str(json).unwrap(),
    }
}

/// The files spooled by the simulator right now.
fn spooled(sim: &pvesim::SimHandle) -> usize {
    std::fs::read_dir(sim.upload_dir())
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn a_streamed_upload_is_spooled_while_its_task_runs_and_removed_after() {
    // Realistic durations: the `imgcopy` task runs until the clock is moved on.
    let sim = start_with(realtime());
    let api = Api::root(&sim);
    let data: Vec<u8> = (0..(3u32 << 20) + 12345)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let sum = hex(&sha2::Sha256::digest(&data));
    let path = "/nodes/pve1/storage/local/upload";
    for (checksum, exit) in [
        (sum.as_str(), "OK".to_string()),
        (
            "00ff",
            format!("checksum mismatch: got '{sum}' != expect '00ff'"),
        ),
    ] {
        let (ct, body) = multipart(
            &[
                ("content", "iso"),
                ("checksum-algorithm", "sha256"),
                ("checksum", checksum),
            ],
            "filename",
            "streamed.iso",
            &data,
        );
        let upid = upload_in_pieces(&sim, path, &ct, &body, 1500).upid();
        assert_eq!(spooled(&sim), 1, "the upload waits on disk for its task");
        sim.advance(Duration::from_secs(60));
        assert_eq!(api.exit(&upid), exit);
        assert_eq!(spooled(&sim), 0, "the task removed the spooled file");
    }
    let content = api
        .get("/nodes/pve1/storage/local/content", &[("content", "iso")])
        .ok()
        .clone();
    let vol = content
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["volid"] == "local:iso/streamed.iso")
        .unwrap();
    assert_eq!(vol["size"], data.len());
    // Refused by the checks once the body is in: nothing stays behind.
    let (ct, body) = multipart(&[("content", "iso")], "filename", "a.txt", &data);
    let r = upload_in_pieces(&sim, path, &ct, &body, 4096);
    assert_eq!(r.body["errors"]["filename"], "wrong file extension");
    let mut cut = body.clone();
    cut.truncate(body.len() - 20);
    let r = upload_in_pieces(&sim, path, &ct, &cut, 4096);
    assert_eq!(
        r.body["message"],
        "multipart parse error: unterminated multipart part\n"
    );
    assert_eq!(spooled(&sim), 0);
}

#[test]
fn upload_errors_match_pve() {
    let sim = start();
    let auth = format!("PVEAPIToken={ROOT_TOKEN}");
    let (ct, body) = multipart(&[("content", "iso")], "file", "a.iso", b"x");
    let r = upload(&sim, &auth, "/nodes/pve1/storage/local/upload", &ct, body);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["message"],
        "wrong field name 'file' for file upload, expected 'filename'\n"
    );
    let (ct, body) = multipart(&[("content", "iso")], "filename", "a.txt", b"x");
    let r = upload(&sim, &auth, "/nodes/pve1/storage/local/upload", &ct, body);
    assert_eq!(r.body["errors"]["filename"], "wrong file extension");
    let (ct, body) = multipart(&[("content", "images")], "filename", "a.iso", b"x");
    let r = upload(&sim, &auth, "/nodes/pve1/storage/local/upload", &ct, body);
    assert_eq!(r.status, 400);
    let (ct, body) = multipart(&[("content", "iso")], "filename", "a.iso", b"x");
    let r = upload(
        &sim,
        &auth,
        "/nodes/pve1/storage/local-lvm/upload",
        &ct,
        body,
    );
    assert_eq!(
        r.body["message"],
        "can't upload to storage type 'lvmthin', not a file based storage!\n"
    );
    // Uploads skip CSRF for tickets.
    let api = Api::login(&sim, "root@pam", ROOT_PASSWORD).unwrap();
    let Auth::Ticket { ticket, .. } = &api.auth else {
        unreachable!()
    };
    let (ct, body) = multipart(&[("content", "iso")], "filename", "b.iso", b"x");
    let r = agent()
        .post(format!("{}/nodes/pve1/storage/local/upload", sim.api_url()))
        .header("Cookie", format!("PVEAuthCookie={ticket}"))
        .header("Content-Type", &ct)
        .send(&body[..])
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[test]
fn full_storage_fails_allocation_as_task_error() {
    let sim = start();
    let api = Api::root(&sim);
    sim.inject(Fault::FillStorage {
        node: "pve1".into(),
        storage: "local-lvm".into(),
        free: 1 << 30,
    })
    .unwrap();
    let list = api.get("/nodes/pve1/storage", &[]).ok().clone();
    let lvm = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["storage"] == "local-lvm")
        .unwrap();
    assert_eq!(lvm["avail"], 1u64 << 30);
    let upid = api
        .post(
            "/nodes/pve1/qemu",
            &[("vmid", "800"), ("scsi0", "local-lvm:32")],
        )
        .upid();
    let exit = api.exit(&upid);
    assert!(
        exit.starts_with("unable to create VM 800 - lvcreate"),
        "{exit}"
    );
    assert!(exit.contains("insufficient free space"), "{exit}");
    assert!(sim.vm_config(800).is_none());
    // Growing a disk beyond the free space fails too.
    let upid = api
        .put(
            "/nodes/pve1/qemu/100/resize",
            &[("disk", "scsi0"), ("size", "+2G")],
        )
        .upid();
    assert!(api.exit(&upid).contains("not enough free space"));
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `DELETE …/content/{volume}` as pve-storage's `delete` and `vdisk_free`: an `imgdel` task, no
/// check of the VMs that use the volume, an absent volume a warning, not an error.
#[test]
fn volume_delete_is_an_imgdel_task_and_checks_no_vm_config() {
    let sim = start();
    let api = Api::root(&sim);
    let isos = |api: &Api| -> Vec<String> {
        api.get("/nodes/pve1/storage/local/content", &[("content", "iso")])
            .ok()
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["volid"].as_str().unwrap().to_string())
            .collect()
    };
    let path = |volume: &str| format!("/nodes/pve1/storage/local/content/{}", enc(volume));
    // Attached to a VM: upstream deletes it all the same.
    let r = api.post(
        "/nodes/pve1/qemu",
        &[
            ("vmid", "700"),
            ("ide2", "local:iso/agent.x86_64.iso,media=cdrom"),
        ],
    );
    assert_eq!(api.exit(&r.upid()), "OK");
    let r = api.delete(&path("local:iso/agent.x86_64.iso"), &[]);
    let upid = r.upid();
    assert!(upid.contains(":imgdel:local:root@pam"), "{upid}");
    assert_eq!(api.exit(&upid), "OK");
    assert!(api
        .task_log(&upid)
        .contains(&"Removed volume 'local:iso/agent.x86_64.iso'".to_string()));
    assert_eq!(isos(&api), vec!["local:iso/rhcos-live.x86_64.iso"]);
    assert_eq!(
        api.config("pve1", 700)["ide2"],
        "local:iso/agent.x86_64.iso,media=cdrom"
    );
    // Again, by name with the storage from the path: free_image warns, the task succeeds.
    let upid = api.delete(&path("iso/agent.x86_64.iso"), &[]).upid();
    assert_eq!(api.exit(&upid), "WARNINGS: 1");
    let log = api.task_log(&upid);
    assert!(
        log.iter()
            .any(|l| l
                == "WARN: disk image '/var/lib/vz/template/iso/agent.x86_64.iso' does not exist"),
        "{log:?}"
    );
    // `delay`: a task that ended well within it answers null.
    let r = api.delete(&path("local:iso/rhcos-live.x86_64.iso"), &[("delay", "5")]);
    assert_eq!(r.ok(), &serde_json::Value::Null);
    assert!(isos(&api).is_empty());
    // The path's storage and the volume ID's must agree (a parameter error on `volume`).
    let r = api.delete(&path("nfs-shared:iso/x.iso"), &[]);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.error("volume"),
        "storage ID mismatch (nfs-shared != local)"
    );
    // The plugin must parse the name; the storage must exist.
    let r = api.delete(&path("local:iso/x.qcow2"), &[]);
    assert_eq!(r.status, 500);
    assert_eq!(
        r.message(),
        "unable to parse directory volume name 'iso/x.qcow2'\n"
    );
    let r = api.delete(
        &format!(
            "/nodes/pve1/storage/local-lvm/content/{}",
            enc("local-lvm:iso/x.iso")
        ),
        &[],
    );
    assert_eq!(r.message(), "unable to parse lvm volume name 'iso/x.iso'\n");
    let r = api.delete(
        &format!("/nodes/pve1/storage/nope/content/{}", enc("nope:iso/x.iso")),
        &[],
    );
    assert_eq!(r.message(), "storage 'nope' does not exist\n");
}

/// Deleting needs Datastore.Allocate on the storage: the CI token's PVEDatastoreUser
/// (AllocateSpace, AllocateTemplate, Audit) may upload an ISO but not delete it.
#[test]
fn volume_delete_needs_datastore_allocate() {
    let sim = start();
    let api = Api::token(&sim, CI_TOKEN);
    let r = api.delete(
        &format!(
            "/nodes/pve1/storage/local/content/{}",
            enc("local:iso/agent.x86_64.iso")
        ),
        &[],
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        r.message(),
        "Permission check failed (/storage/local, Datastore.Allocate)\n"
    );
    let root = Api::root(&sim);
    let list = root
        .get("/nodes/pve1/storage/local/content", &[("content", "iso")])
        .ok()
        .clone();
    assert_eq!(list.as_array().unwrap().len(), 2, "nothing deleted");
}
