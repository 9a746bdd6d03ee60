//! Runs the built `proxshift` binary: dry runs, JSON output, exit codes, the clusters table (with a
//! fake `ansible-inventory` and a tiny Proxmox API), and playbook runs through a fake
//! `ansible-playbook` script (streaming, recap parsing, exit codes) — plus a real tiny playbook through
//! the real `ansible-playbook` when the project's venv has one.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_proxshift");
const PLAYBOOKS: [&str; 7] = [
    "site.yaml",
    "start.yaml",
    "stop.yaml",
    "status.yaml",
    "deprovision.yaml",
    "scale.yaml",
    "proxmox_access.yaml",
];

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh project checkout in a temp dir: playbooks/ (empty playbooks), inventory/, bin/ for fakes.
struct Project {
    dir: PathBuf,
}

impl Project {
    fn new(name: &str) -> Self {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("proxshift-cli-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("playbooks")).unwrap();
        std::fs::create_dir_all(dir.join("inventory")).unwrap();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        for p in PLAYBOOKS {
            std::fs::write(dir.join("playbooks").join(p), "---\n").unwrap();
        }
        Project { dir }
    }

    fn bin(&self) -> PathBuf {
        self.dir.join("bin")
    }

    fn script(&self, name: &str, body: &str) {
        let p = self.bin().join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A fake ansible-inventory printing `inventory` as `--list` output.
    fn fake_inventory(&self, inventory: &Value) {
        std::fs::write(self.dir.join("inventory.json"), inventory.to_string()).unwrap();
        self.script(
            "ansible-inventory",
            &format!(
                "echo \"$@\" > '{0}/inventory-args'\ncat '{0}/inventory.json'\n",
                self.dir.display()
            ),
        );
    }

    /// A fake ansible-playbook: records its argv (one per line), prints `transcript` and exits `rc`.
    fn fake_playbook(&self, transcript: &str, rc: i32) {
        std::fs::write(self.dir.join("transcript.txt"), transcript).unwrap();
        self.script(
            "ansible-playbook",
            &format!(
                "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{0}/argv'\nenv > '{0}/env'\ncat '{0}/transcript.txt'\nexit {rc}\n",
                self.dir.display()
            ),
        );
    }

    fn argv(&self) -> Option<Vec<String>> {
        std::fs::read_to_string(self.dir.join("argv"))
            .ok()
            .map(|s| s.lines().map(String::from).collect())
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin().display()))
            .env("HOME", &self.dir)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("proxshift runs")
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
fn json_out(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            stdout(o),
            stderr(o)
        )
    })
}

fn example_inventory(proxmox_host: Option<&str>) -> Value {
    let mut site = json!({"proxmox_api_user": "root@pam", "proxmox_api_token_id": "cli", "ocp_version": "4.19"});
    if let Some(h) = proxmox_host {
        site["proxmox_api_host"] = json!(h);
    }
    let host = |extra: Value| {
        let mut v = site.clone();
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    json!({
        "_meta": {"hostvars": {
            "lab-sno-0": host(json!({"base_domain": "lab.example.com", "ip": "10.20.0.11", "mac": "BC:24:11:20:00:11", "pve_node": "pve1"})),
            "lab-compact-0": host(json!({"base_domain": "lab.example.com"})),
            "lab-compact-1": host(json!({"base_domain": "lab.example.com"})),
            "lab-compact-2": host(json!({"base_domain": "lab.example.com"}))
        }},
        "all": {"children": ["ungrouped", "clusters"]},
        "clusters": {"children": ["lab-compact", "lab-sno"]},
        "lab-compact": {"hosts": ["lab-compact-0", "lab-compact-1", "lab-compact-2"]},
        "lab-sno": {"hosts": ["lab-sno-0"]}
    })
}

#[test]
fn dry_run_prints_the_exact_command_for_every_subcommand() {
    let p = Project::new("dry");
    let base = "ansible-playbook -i inventory/ playbooks";
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["provision", "lab-sno"], format!("{base}/site.yaml -e cluster_name=lab-sno")),
        (
            vec!["provision", "lab-sno", "--force", "--skip", "acm", "--check", "--diff"],
            format!("{base}/site.yaml -e cluster_name=lab-sno -e force_install=true --skip-tags acm --check --diff"),
        ),
        (
            vec!["manifests", "lab-sno"],
            format!("{base}/site.yaml -e cluster_name=lab-sno --tags preflight,secrets,manifests"),
        ),
        (vec!["start", "lab-sno"], format!("{base}/start.yaml -e cluster_name=lab-sno")),
        (vec!["stop", "lab-sno", "-vv"], format!("{base}/stop.yaml -e cluster_name=lab-sno -vv")),
        (vec!["status", "lab-sno"], format!("{base}/status.yaml -e cluster_name=lab-sno")),
        (
            vec!["deprovision", "lab-sno", "--vault"],
            format!("{base}/deprovision.yaml -e cluster_name=lab-sno -e deprovision_vault=true"),
        ),
        (vec!["scale", "prod-ha"], format!("{base}/scale.yaml -e cluster_name=prod-ha")),
        (
            vec!["backup", "lab-sno", "--keep", "5", "--stay-stopped"],
            format!("{base}/restore_point.yaml -e cluster_name=lab-sno -e restore_point_keep=5 -e restore_point_start=false"),
        ),
        (
            vec!["restore-point", "lab-sno", "--name", "nightly"],
            format!("{base}/restore_point.yaml -e cluster_name=lab-sno -e restore_point_name=nightly"),
        ),
        (
            vec!["restore", "lab-sno", "--restore-point", "nightly", "--yes", "--check"],
            format!("{base}/restore.yaml -e cluster_name=lab-sno -e restore_point=nightly --check"),
        ),
        (vec!["acm-import", "lab-sno"], format!("{base}/site.yaml -e cluster_name=lab-sno --tags acm")),
        (
            vec!["certs", "lab-sno", "--warn-days", "7"],
            format!("{base}/certs.yaml -e cluster_name=lab-sno -e certificate_warning_days=7"),
        ),
        (vec!["proxmox-access"], format!("{base}/proxmox_access.yaml")),
        (
            vec!["status", "lab-sno", "--", "-e", "note=two words", "--limit", "localhost"],
            format!("{base}/status.yaml -e cluster_name=lab-sno -e 'note=two words' --limit localhost"),
        ),
        (vec!["clusters"], "ansible-inventory -i inventory/ --list".to_string()),
    ];
    for (args, want) in cases {
        let mut a = vec!["--dry-run"];
        a.extend(&args);
        let o = p.run(&a);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert_eq!(stdout(&o), format!("{want}\n"), "{args:?}");
        // Nothing ran.
        assert!(p.argv().is_none());
    }
    // Global options also work after the subcommand, and -i / PROXSHIFT_INVENTORY choose the inventory.
    let o = p.run(&["start", "lab-sno", "-n", "-i", "/etc/my inv"]);
    assert_eq!(
        stdout(&o),
        "ansible-playbook -i '/etc/my inv' playbooks/start.yaml -e cluster_name=lab-sno\n"
    );
    let o = p
        .command(&["-n", "start", "lab-sno"])
        .env("PROXSHIFT_INVENTORY", "site-b/")
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o),
        "ansible-playbook -i site-b/ playbooks/start.yaml -e cluster_name=lab-sno\n"
    );
}

#[test]
fn dry_run_from_elsewhere_uses_absolute_paths_and_the_collections() {
    let p = Project::new("elsewhere");
    std::fs::create_dir_all(p.dir.join("ansible_collections/proxshift")).unwrap();
    let root = p.dir.display().to_string();
    let o = p
        .command(&["-n", "stop", "lab-sno"])
        .current_dir("/")
        .env("PROXSHIFT_ROOT", &p.dir)
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o),
        format!(
            "ANSIBLE_COLLECTIONS_PATH={root}/build/collections:~/.ansible/collections:/usr/share/ansible/collections:{root} ansible-playbook -i {root}/inventory/ {root}/playbooks/stop.yaml -e cluster_name=lab-sno\n"
        )
        .replace(
            &format!("ANSIBLE_COLLECTIONS_PATH={root}/build/collections:~/.ansible/collections:/usr/share/ansible/collections:{root}"),
            &format!("ANSIBLE_COLLECTIONS_PATH='{root}/build/collections:~/.ansible/collections:/usr/share/ansible/collections:{root}'")
        )
    );
    // A user-set collections path is left alone.
    let o = p
        .command(&["-n", "stop", "lab-sno"])
        .env("ANSIBLE_COLLECTIONS_PATH", "/mine")
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o),
        "ansible-playbook -i inventory/ playbooks/stop.yaml -e cluster_name=lab-sno\n"
    );
}

#[test]
fn dry_run_json_describes_the_plan() {
    let p = Project::new("dryjson");
    let o = p.run(&[
        "--json",
        "-n",
        "provision",
        "prod-ha",
        "--force",
        "--only",
        "vms,start",
        "--",
        "--limit",
        "x",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v = json_out(&o);
    assert_eq!(v["dry_run"], true);
    assert_eq!(
        v["argv"],
        json!([
            "ansible-playbook",
            "-i",
            "inventory/",
            "playbooks/site.yaml",
            "-e",
            "cluster_name=prod-ha",
            "-e",
            "force_install=true",
            "--tags",
            "vms,start",
            "--limit",
            "x"
        ])
    );
    assert_eq!(v["plan"]["phases"], json!(["vms", "start"]));
    assert_eq!(v["plan"]["extra_vars"], json!({"force_install": "true"}));
    assert_eq!(v["command"], "ansible-playbook -i inventory/ playbooks/site.yaml -e cluster_name=prod-ha -e force_install=true --tags vms,start --limit x");
}

#[test]
fn usage_errors_exit_2() {
    let p = Project::new("usage");
    let o = p.run(&["start"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("<CLUSTER>"), "{}", stderr(&o));
    let o = p.run(&["provision", "c", "--only", "vm", "-n"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown phase 'vm'"), "{}", stderr(&o));
    let o = p.run(&["--json", "provision", "c", "--skip", "nope", "-n"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(json_out(&o)["error"]["kind"], "usage");
    let o = p.run(&["clusters", "--check"]);
    assert_eq!(o.status.code(), Some(2));
    let o = p.run(&["bogus"]);
    assert_eq!(o.status.code(), Some(2));
    let o = p.run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("Exit codes:") && stdout(&o).contains("130"));
}

#[test]
fn project_and_tool_errors() {
    let p = Project::new("errors");
    // Outside a checkout.
    let o = p
        .command(&["-n", "stop", "c"])
        .current_dir("/")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("not inside a ProxShift checkout"));
    // No ansible-playbook anywhere: 4, also as JSON.
    let o = p.run(&["stop", "lab-sno"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("ansible-playbook not found"));
    let o = p.run(&["--json", "stop", "lab-sno"]);
    assert_eq!(json_out(&o)["error"]["kind"], "tool_not_found");
    let o = p.run(&["clusters"]);
    assert_eq!(o.status.code(), Some(4));
    // The playbook exists but ansible-inventory does not.
    p.fake_playbook("", 0);
    let o = p.run(&["stop", "lab-sno"]);
    assert_eq!(o.status.code(), Some(4));
    assert!(stderr(&o).contains("ansible-inventory"));
    // A cluster the inventory does not have: 3, and the playbook never ran.
    p.fake_inventory(&example_inventory(None));
    let o = p.run(&["stop", "ocp-sno3"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("cluster 'ocp-sno3' is not in the inventory inventory/ (clusters: lab-compact, lab-sno)"), "{}", stderr(&o));
    assert!(p.argv().is_none());
    // A playbook the checkout does not have: 3.
    std::fs::remove_file(p.dir.join("playbooks/scale.yaml")).unwrap();
    let o = p.run(&["scale", "lab-sno"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("scale.yaml does not exist"));
    // ansible-inventory failing: 3.
    p.script("ansible-inventory", "echo broken >&2\nexit 1\n");
    let o = p.run(&["clusters"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("broken"));
}

#[test]
fn destructive_runs_need_confirmation() {
    let p = Project::new("confirm");
    p.fake_inventory(&example_inventory(None));
    p.fake_playbook("PLAY RECAP ***\nlocalhost : ok=1 changed=1 unreachable=0 failed=0 skipped=0 rescued=0 ignored=0\n", 0);
    for args in [
        vec!["deprovision", "lab-sno"],
        vec!["provision", "lab-sno", "--force"],
    ] {
        let o = p.run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains("pass --yes"), "{}", stderr(&o));
        assert!(p.argv().is_none(), "{args:?} ran the playbook unconfirmed");
    }
    // --check changes nothing, so it needs no confirmation.
    let o = p.run(&["deprovision", "lab-sno", "--check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(p.argv().unwrap().contains(&"--check".to_string()));
    let o = p.run(&["deprovision", "lab-sno", "--vault", "--yes"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        p.argv().unwrap(),
        vec![
            "-i",
            "inventory/",
            "playbooks/deprovision.yaml",
            "-e",
            "cluster_name=lab-sno",
            "-e",
            "deprovision_vault=true"
        ]
    );
}

const TRANSCRIPT_OK: &str = "
PLAY [Provision an OpenShift cluster on Proxmox VE] ****************************

TASK [Build the cluster model] *************************************************
ok: [localhost]

TASK [proxshift.hashi_vault.secrets : Read the secrets from Vault] *************
ok: [localhost]

TASK [Preflight: VMIDs, names and MACs are free] *******************************
ok: [localhost]

TASK [proxshift.openshift.manifests : Render the manifests] ********************
changed: [localhost]

PLAY RECAP *********************************************************************
localhost                  : ok=4    changed=1    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
";

#[test]
fn a_successful_run_streams_and_summarises() {
    let p = Project::new("ok");
    p.fake_inventory(&example_inventory(None));
    p.fake_playbook(TRANSCRIPT_OK, 0);
    let o = p.run(&["manifests", "lab-sno"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    // The playbook's own output is shown as is, then the summary.
    assert!(out.starts_with(&TRANSCRIPT_OK[..60]), "{out}");
    assert!(
        out.contains("proxshift manifests lab-sno succeeded after 00:0"),
        "{out}"
    );
    assert!(
        out.contains("\npreflight  ok        1        0       0        0\n"),
        "{out}"
    );
    assert!(
        out.contains("\nmanifests  changed   0        1       0        0\n"),
        "{out}"
    );
    assert!(
        out.contains("Recap localhost: ok=4 changed=1 unreachable=0 failed=0"),
        "{out}"
    );
    // Not a terminal: no progress line, no colour.
    assert!(!out.contains('\r') && !out.contains('\u{1b}'), "{out:?}");
    assert_eq!(
        p.argv().unwrap(),
        vec![
            "-i",
            "inventory/",
            "playbooks/site.yaml",
            "-e",
            "cluster_name=lab-sno",
            "--tags",
            "preflight,secrets,manifests"
        ]
    );
    // The run was told not to colour, and ansible-inventory was asked for --list of the same inventory.
    let env = std::fs::read_to_string(p.dir.join("env")).unwrap();
    assert!(env.contains("ANSIBLE_NOCOLOR=1"));
    let inv_args = std::fs::read_to_string(p.dir.join("inventory-args")).unwrap();
    assert_eq!(inv_args.trim(), "-i inventory/ --list");
}

#[test]
fn a_failed_run_exits_1_with_a_json_summary() {
    let p = Project::new("fail");
    p.fake_inventory(&example_inventory(None));
    let transcript = format!(
        "{}\nTASK [proxshift.proxmox.cluster_vms : Create the VMs] ***\nchanged: [localhost] => (item=lab-sno-0)\n\
         failed: [localhost] (item=lab-sno-1) => {{\"changed\": false, \"item\": \"lab-sno-1\", \"msg\": \"node pve9 is offline\"}}\n\n\
         PLAY RECAP ***\nlocalhost : ok=4 changed=1 unreachable=0 failed=1 skipped=0 rescued=0 ignored=0\n",
        TRANSCRIPT_OK.split("PLAY RECAP").next().unwrap()
    );
    p.fake_playbook(&transcript, 2);
    let o = p.run(&["--json", "provision", "lab-sno", "--only", "manifests,vms"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json_out(&o);
    // The playbook output went to stderr; stdout is one JSON object.
    assert!(stderr(&o).contains("TASK [proxshift.proxmox.cluster_vms : Create the VMs]"));
    assert_eq!(v["status"], "failed");
    assert_eq!(v["ansible_rc"], 2);
    assert_eq!(v["exit_code"], 1);
    assert_eq!(v["cluster"], "lab-sno");
    assert_eq!(
        v["recap"][0],
        json!({"host": "localhost", "ok": 4, "changed": 1, "unreachable": 0, "failed": 1, "skipped": 0, "rescued": 0, "ignored": 0})
    );
    assert_eq!(v["failures"][0]["phase"], "vms");
    assert_eq!(v["failures"][0]["item"], "lab-sno-1");
    assert_eq!(v["failures"][0]["message"], "node pve9 is offline");
    let phases: Vec<(String, String)> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["result"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // Planned phases first (setup before them); phases the tags pulled in are reported too.
    assert_eq!(
        phases,
        vec![
            ("setup".into(), "ok".into()),
            ("manifests".into(), "changed".into()),
            ("vms".into(), "failed".into()),
            ("secrets".into(), "ok".into()),
            ("preflight".into(), "ok".into()),
        ]
    );
}

#[test]
fn an_interrupted_run_exits_130() {
    let p = Project::new("interrupt");
    p.fake_inventory(&example_inventory(None));
    p.fake_playbook("TASK [proxshift.proxmox.cluster_power : Start] ***\n [ERROR]: User interrupted execution\n", 99);
    let o = p.run(&["start", "lab-sno"]);
    assert_eq!(o.status.code(), Some(130));
    assert!(
        stdout(&o).contains("start lab-sno was interrupted"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn output_is_streamed_while_the_playbook_runs() {
    let p = Project::new("stream");
    p.fake_inventory(&example_inventory(None));
    // The fake prints one task, then waits until the test has seen that line through proxshift.
    let go = p.dir.join("go");
    p.script(
        "ansible-playbook",
        &format!(
            "echo 'TASK [proxshift.proxmox.cluster_power : Start the VMs] ***'\necho 'changed: [localhost]'\n\
             i=0; while [ ! -e '{go}' ]; do i=$((i+1)); [ $i -gt 200 ] && {{ echo 'never streamed'; exit 7; }}; sleep 0.05; done\n\
             echo 'PLAY RECAP ***'\necho 'localhost : ok=1 changed=1 unreachable=0 failed=0 skipped=0 rescued=0 ignored=0'\n",
            go = go.display()
        ),
    );
    let mut child = p
        .command(&["start", "lab-sno"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "output ended before the first task appeared"
        );
        // No clock here: the fake gives up and exits 7 if `go` never comes, ending the output.
        if line.starts_with("changed: [localhost]") {
            break;
        }
    }
    std::fs::write(&go, "").unwrap();
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{rest}");
    assert!(!rest.contains("never streamed"));
    assert!(
        rest.contains("\nstart  changed   0        1       0        0\n"),
        "{rest}"
    );
}

/// A one-shot Proxmox API: answers `/cluster/resources` and records the Authorization header.
fn tiny_pve(vms: Value) -> (String, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut req = Vec::new();
        let mut buf = [0u8; 4096];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            req.extend_from_slice(&buf[..n]);
        }
        let head = String::from_utf8_lossy(&req).into_owned();
        let body = json!({"data": vms}).to_string();
        let ok = head.starts_with("GET /api2/json/cluster/resources?type=vm ");
        let status = if ok { "200 OK" } else { "404 Not Found" };
        write!(s, "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
        head
    });
    (url, handle)
}

#[test]
fn clusters_table_and_json_with_live_states() {
    let p = Project::new("clusters");
    let (url, server) = tiny_pve(json!([
        {"vmid": 3100, "name": "lab-sno-0", "node": "pve1", "type": "qemu", "status": "running", "tags": "proxshift-lab-sno", "template": 0},
        {"vmid": 3101, "name": "lab-compact-0", "node": "pve2", "type": "qemu", "status": "stopped", "tags": "proxshift-lab-compact"},
        {"vmid": 200, "name": "lab-compact-1", "node": "pve2", "type": "qemu", "status": "running"},
        {"vmid": 9000, "name": "tmpl", "node": "pve1", "type": "qemu", "template": 1},
        {"vmid": 100, "name": "ct", "node": "pve1", "type": "lxc", "status": "running"}
    ]));
    p.fake_inventory(&example_inventory(Some(&url)));
    let canary = "canary-3f9c1e-token-secret";
    let o = p
        .command(&["clusters", "--hosts"])
        .env("PROXMOX_TOKEN_SECRET", canary)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let head = server.join().unwrap();
    assert!(
        head.contains(&format!("PVEAPIToken=root@pam!cli={canary}")),
        "{head}"
    );
    let out = stdout(&o);
    assert!(!out.contains(canary) && !stderr(&o).contains(canary));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "CLUSTER      TOPOLOGY  HOSTS      VERSION  BASE DOMAIN      VMS"
    );
    assert_eq!(lines[1], "lab-compact  compact   3 (3m+0w)  4.19     lab.example.com  1 stopped, 1 running, 1 absent (1 not owned)");
    assert_eq!(
        lines[2],
        "lab-sno      SNO       1 (1m+0w)  4.19     lab.example.com  1 running"
    );
    assert!(out.contains("lab-compact  lab-compact-1  master*  -           -                  pve2      200   running (not owned)"), "{out}");
    assert!(out.contains("lab-sno      lab-sno-0      master*  10.20.0.11  BC:24:11:20:00:11  pve1      3100  running"), "{out}");

    // JSON, and without credentials: live states are skipped with the reason.
    let o = p.run(&["clusters", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v = json_out(&o);
    assert_eq!(v["live"]["status"], "disabled");
    assert!(v["live"]["message"]
        .as_str()
        .unwrap()
        .contains("PROXMOX_TOKEN_SECRET"));
    assert_eq!(v["clusters"][1]["name"], "lab-sno");
    assert_eq!(v["clusters"][1]["topology"], "sno");
    assert_eq!(v["clusters"][0]["hosts"].as_array().unwrap().len(), 3);
    // An unreachable Proxmox is reported, not fatal.
    p.fake_inventory(&example_inventory(Some("http://127.0.0.1:1")));
    let o = p
        .command(&["clusters", "--json"])
        .env("PROXMOX_TOKEN_SECRET", canary)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let v = json_out(&o);
    assert_eq!(v["live"]["status"], "error");
    assert_eq!(v["live"]["source"], "http://127.0.0.1:1");
    assert!(!stdout(&o).contains(canary));
}

fn real_ansible_playbook() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin");
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain(std::iter::once(venv))
        .find(|d| d.join("ansible-playbook").is_file() && d.join("ansible-inventory").is_file())
}

/// A project with a one-cluster inventory for real ansible runs, and a way to run proxshift with that
/// ansible on PATH and its state kept inside the project; `None` (skip) without an ansible install.
fn real_project(name: &str) -> Option<(Project, RealAnsible)> {
    let Some(bin) = real_ansible_playbook() else {
        eprintln!("SKIP: no ansible-playbook (run `make venv`)");
        return None;
    };
    let p = Project::new(name);
    std::fs::write(
        p.dir.join("inventory/hosts.yml"),
        "all:\n  children:\n    clusters:\n      children:\n        lab-sno:\n          vars: {ocp_version: '4.19', base_domain: lab.example.com}\n          hosts:\n            lab-sno-0: {ip: 10.20.0.11}\n",
    )
    .unwrap();
    Some((p, RealAnsible(bin)))
}

/// The folder holding the real ansible-playbook.
struct RealAnsible(PathBuf);

impl RealAnsible {
    fn run(&self, p: &Project, args: &[&str]) -> Output {
        p.command(args)
            .env("PATH", format!("{}:/usr/bin:/bin", self.0.display()))
            .env("ANSIBLE_HOME", p.dir.join(".ansible"))
            .env("ANSIBLE_LOCAL_TEMP", p.dir.join(".ansible/tmp"))
            .output()
            .unwrap()
    }
}

#[test]
fn a_real_tiny_playbook_through_real_ansible() {
    let Some((p, ansible)) = real_project("real") else {
        return;
    };
    std::fs::write(
        p.dir.join("playbooks/status.yaml"),
        r#"- name: Status
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Check the cluster is in the inventory
      ansible.builtin.assert:
        that: [cluster_name in groups]
    - name: Say hello
      ansible.builtin.command: "echo {{ cluster_name }}"
      changed_when: true
    - name: Skipped step
      ansible.builtin.debug: {msg: never}
      when: false
    - name: Fail when asked
      ansible.builtin.fail: {msg: "asked to fail for {{ cluster_name }}"}
      when: fail_it | default(false) | bool
"#,
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["--json", "status", "lab-sno"];
        args.extend(extra);
        ansible.run(&p, &args)
    };
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json_out(&o);
    assert_eq!(v["status"], "ok");
    assert_eq!(v["recap"][0]["host"], "localhost");
    assert_eq!(
        (
            v["recap"][0]["ok"].as_u64(),
            v["recap"][0]["changed"].as_u64(),
            v["recap"][0]["skipped"].as_u64()
        ),
        (Some(2), Some(1), Some(2))
    );
    assert_eq!(v["phases"][0]["name"], "status");
    assert_eq!(
        (
            v["phases"][0]["ok"].as_u64(),
            v["phases"][0]["changed"].as_u64(),
            v["phases"][0]["skipped"].as_u64()
        ),
        (Some(1), Some(1), Some(2))
    );
    let o = run(&["--", "-e", "fail_it=true"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json_out(&o);
    assert_eq!(v["ansible_rc"], 2);
    assert_eq!(v["failures"][0]["task"], "Fail when asked");
    assert_eq!(v["failures"][0]["message"], "asked to fail for lab-sno");
    assert_eq!(v["recap"][0]["failed"], 1);
}

#[test]
fn real_ansible_phases_come_from_task_tags() {
    let Some((p, ansible)) = real_project("realphases") else {
        return;
    };
    // One role imported by three phases, as site.yaml's preflight reuses the manifests role.
    let role = p.dir.join("ansible_collections/demo/t/roles/secrets/tasks");
    std::fs::create_dir_all(&role).unwrap();
    std::fs::write(
        p.dir.join("ansible_collections/demo/t/galaxy.yml"),
        "namespace: demo\nname: t\nversion: 1.0.0\nreadme: README.md\nauthors: [t]\n",
    )
    .unwrap();
    std::fs::write(
        role.join("main.yml"),
        "- name: Probe\n  ansible.builtin.debug: {msg: probe}\n  changed_when: probe_changed | default(false)\n",
    )
    .unwrap();
    std::fs::write(
        p.dir.join("playbooks/site.yaml"),
        r#"- name: Site
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Model
      ansible.builtin.set_fact: {model: 1}
      tags: [always]
    - name: Secrets
      ansible.builtin.import_role: {name: demo.t.secrets}
      tags: [secrets, preflight, manifests]
    - name: Preflight
      ansible.builtin.import_role: {name: demo.t.secrets}
      tags: [preflight]
    - name: Manifests
      ansible.builtin.import_role: {name: demo.t.secrets}
      vars: {probe_changed: true}
      tags: [manifests]
    - name: VMs
      ansible.builtin.import_role: {name: demo.t.secrets}
      tags: [vms]
"#,
    )
    .unwrap();
    let o = ansible.run(&p, &["--json", "manifests", "lab-sno"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json_out(&o);
    let phases: Vec<(String, u64, u64)> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().into(),
                p["ok"].as_u64().unwrap(),
                p["changed"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        phases,
        vec![
            ("setup".into(), 1, 0),
            ("preflight".into(), 1, 0),
            ("secrets".into(), 1, 0),
            ("manifests".into(), 0, 1),
        ]
    );
    // The callback's lines were read, not shown; the playbook's own output was.
    assert!(!stderr(&o).contains("##proxshift-tags"), "{}", stderr(&o));
    assert!(stderr(&o).contains("TASK [demo.t.secrets : Probe]"));
}

#[test]
fn rehearse_writes_a_pvesim_seed_and_prints_the_commands() {
    let p = Project::new("rehearse");
    let mut inv = example_inventory(Some("pve1.lab.example.com"));
    let layout = json!({
        "nodes": [
            {"name": "pve1", "cpus": 16, "memory": "64G",
             "storages": [{"id": "local-lvm", "type": "lvmthin", "content": ["images"], "size": "1T"}]},
            {"name": "pve2", "cpus": 16, "memory": "32G"}
        ],
        "vms": [{"vmid": 3100, "node": "pve2", "name": "lab-sno-0", "mac": "BC:24:11:20:00:11", "memory": 8192}]
    });
    for h in inv["_meta"]["hostvars"]
        .as_object_mut()
        .unwrap()
        .values_mut()
    {
        h["proxmox_layout"] = layout.clone();
    }
    p.fake_inventory(&inv);
    let out = p.dir.join("rh");
    let out_s = out.display().to_string();
    // --dry-run: the commands, no file.
    let o = p.run(&["--json", "-n", "rehearse", "lab-sno", "--out", &out_s]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!out.exists());
    let v = json_out(&o);
    assert_eq!(v["seed_written"], false);
    assert_eq!(
        v["seed"]["vms"][0]["config"]["net0"],
        "virtio=BC:24:11:20:00:11,bridge=vmbr0"
    );
    // The playbook's own identity (root@pam!cli in this inventory) gets the simulator token.
    assert_eq!(v["seed"]["tokens"][0]["userid"], "root@pam");
    assert_eq!(v["seed"]["tokens"][0]["tokenid"], "cli");
    let secret = v["seed"]["tokens"][0]["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let play = v["commands"][1].as_str().unwrap();
    assert!(play.starts_with(&format!("PROXMOX_TOKEN_SECRET={secret} ansible-playbook -i inventory/ playbooks/site.yaml -e cluster_name=lab-sno -e proxmox_api_host=https://127.0.0.1:18006")), "{play}");
    assert!(
        play.contains(&format!("-e proxmox_ca_path={out_s}/pvesim-ca.pem"))
            && play.contains("--tags preflight,secrets,manifests,vms,start")
            && play.ends_with(&format!(
                "-e @{out_s}/rehearsal-vars.json --skip-tags secrets"
            )),
        "{play}"
    );
    assert_eq!(
        v["commands"][0],
        format!("pvesim --listen 127.0.0.1:18006 --seed {out_s}/pvesim-seed.yaml --tls --ca-out {out_s}/pvesim-ca.pem --time-scale 0 --auth-delay-ms 0")
    );
    // --prepare-only: the seed file is written, and it is YAML of the same seed.
    let o = p.run(&[
        "rehearse",
        "lab-sno",
        "--prepare-only",
        "--out",
        &out_s,
        "--listen",
        "127.0.0.1:19999",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains(&format!(
        "Wrote the simulator seed for lab-sno (inventory proxmox_layout): {out_s}/pvesim-seed.yaml"
    )));
    assert!(stdout(&o).contains("pvesim --listen 127.0.0.1:19999"));
    let seed: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(out.join("pvesim-seed.yaml")).unwrap())
            .unwrap();
    assert_eq!(seed["nodes"][1]["name"], "pve2");
    assert_eq!(seed["nodes"][0]["storages"][0]["id"], "local-lvm");
    assert_eq!(seed["vms"][0]["vmid"], 3100);
    // Unknown cluster: 3; no layout: 3, saying what to add.
    let o = p.run(&["rehearse", "nope", "--out", &out_s]);
    assert_eq!(o.status.code(), Some(3));
    p.fake_inventory(&example_inventory(None));
    let o = p.run(&["rehearse", "lab-sno", "--out", &out_s]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("no layout to rehearse on") && stderr(&o).contains("--seed FILE"),
        "{}",
        stderr(&o)
    );
    // The vars file carries the simulator's token and placeholder secrets, nothing real.
    let vars: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("rehearsal-vars.json")).unwrap())
            .unwrap();
    assert_eq!(vars["proxmox_api_password"], Value::Null);
    assert!(vars["secrets_values"]["pull_secret"]
        .as_str()
        .unwrap()
        .contains("rehearsal.invalid"));
    // With placeholder secrets there is no Vault to read the cluster's record from.
    assert_eq!(vars["proxshift_record_store"], Value::Bool(false));
}

/// What `ansible-playbook` printed in a real `proxshift rehearse lab-sno` on the example inventory
/// (inventory/) whose DNS records do not exist: the preflight assert fails with two problems, its
/// result printed over several lines (tests/fixtures/README.md says how it was captured).
const PREFLIGHT_DNS_TRANSCRIPT: &str = include_str!("fixtures/rehearse-preflight-dns.txt");

#[test]
fn a_rehearsal_lists_each_preflight_problem() {
    let p = Project::new("rehearse-dns");
    let mut inv = example_inventory(None);
    let layout = json!({"nodes": [{"name": "pve1", "cpus": 16, "memory": "64G",
        "storages": [{"id": "local-lvm", "type": "lvmthin", "content": ["images"], "size": "1T"}]}]});
    for h in inv["_meta"]["hostvars"]
        .as_object_mut()
        .unwrap()
        .values_mut()
    {
        h["proxmox_layout"] = layout.clone();
    }
    p.fake_inventory(&inv);
    p.fake_playbook(PREFLIGHT_DNS_TRANSCRIPT, 2);
    // A stand-in for pvesim: says where it listens, and on SIGINT dumps the seed as its final state.
    p.script(
        "pvesim",
        "while [ $# -gt 0 ]; do case \"$1\" in --seed) seed=$2; shift;; --dump-state) dump=$2; shift;; esac; shift; done\n\
         trap 'cp \"$seed\" \"$dump\"; exit 0' INT\n\
         echo 'pvesim listening on https://127.0.0.1:18999/api2/json'\n\
         i=0; while [ $i -lt 300 ]; do i=$((i+1)); sleep 0.1; done\n",
    );
    let out = p.dir.join("rh").display().to_string();
    let pvesim = p.bin().join("pvesim").display().to_string();
    let args = ["rehearse", "lab-sno", "--out", &out, "--pvesim", &pvesim];
    // Started as a non-interactive shell's background job (`proxshift rehearse … &`, `nohup`): SIGINT
    // ignored, which the simulator (here a shell, which cannot trap a signal it inherited ignored) must not
    // inherit — SIGINT is how the CLI asks it for its final state.
    let mut command = p.command(&[&["--json"], &args[..]].concat());
    // SAFETY: `signal` is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            Ok(())
        });
    }
    let o = command.output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let v = json_out(&o);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["ansible_rc"], 2);
    // The two DNS problems, each on its own — not the first line of the multi-line result (`{`).
    assert_eq!(
        v["problems"],
        json!([
            {"kind": "dns", "source": "preflight",
             "message": "DNS: api.lab-sno.lab.example.com resolves to nothing, expected 10.20.0.11 — add the record to your DNS."},
            {"kind": "dns", "source": "preflight",
             "message": "DNS: console-openshift-console.apps.lab-sno.lab.example.com resolves to nothing, expected 10.20.0.11 — add the record to your DNS."}
        ]),
        "{v:#}"
    );
    let o = p.run(&args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("Would fail or clash (2):\n- [dns] DNS: api.lab-sno.lab.example.com resolves to nothing")
            && !text.contains(": { (preflight)"),
        "{text}"
    );
}

#[test]
fn ctrl_c_stops_the_playbook_and_still_summarises() {
    let p = Project::new("sigint");
    p.fake_inventory(&example_inventory(None));
    let pidfile = p.dir.join("child.pid");
    // Like ansible-playbook: on SIGINT it reports the interruption and exits 99. The pid file is
    // written only once the trap is set, so the test cannot signal a script not yet listening (bash
    // ignores a SIGINT whose foreground `sleep` exits normally).
    p.script(
        "ansible-playbook",
        &format!(
            "trap 'echo \"[ERROR]: User interrupted execution\"; exit 99' INT\n\
             echo 'TASK [proxshift.proxmox.cluster_power : Start] ***'\necho $$ > '{pid}'\n\
             i=0; while [ $i -lt 300 ]; do i=$((i+1)); sleep 0.1; done\necho 'not interrupted'; exit 0\n",
            pid = pidfile.display()
        ),
    );
    let mut command = p.command(&["start", "lab-sno"]);
    // As from a terminal: SIGINT at its default. A job started in the background by a non-interactive
    // shell (`cmd &`, as some CI runners do) inherits SIGINT ignored, and an ignored signal cannot be
    // trapped by the playbook's shell, so the test would measure its launcher, not proxshift.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while !pidfile.exists() || std::fs::read_to_string(&pidfile).unwrap().trim().is_empty() {
        // The fake is bounded (30 s), so proxshift ending first is the only way this wait fails.
        assert!(
            child.try_wait().unwrap().is_none(),
            "proxshift ended before the playbook started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    // A terminal's Ctrl-C reaches the whole process group: proxshift must survive it …
    let me = child.id() as i32;
    assert_eq!(unsafe { libc::kill(me, libc::SIGINT) }, 0);
    std::thread::sleep(Duration::from_millis(300));
    // … while ansible-playbook stops.
    let playbook: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(unsafe { libc::kill(playbook, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("User interrupted execution") && !out.contains("not interrupted"),
        "{out}"
    );
    assert!(
        out.contains("proxshift start lab-sno was interrupted"),
        "{out}"
    );
}
