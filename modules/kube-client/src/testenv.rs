//! A real etcd + kube-apiserver + kube-controller-manager for integration tests, found by the
//! envtest convention: `KUBEBUILDER_ASSETS` names a folder with `kube-apiserver`, `etcd` and
//! `kube-controller-manager` (default: the cache `scripts/deps/kube.sh` builds from Go modules,
//! `/var/cache/proxshift/kube-current/bin`: Kubernetes 1.34, etcd 3.6).
//!
//! The cluster is live, as a real one is: kube-controller-manager signs approved CSRs, marks a node
//! whose kubelet stops renewing its Lease `Ready=Unknown` and taints it `unreachable`, collects
//! garbage, finalises deleted namespaces and fills service-account token Secrets.
//!
//! Missing binaries are a test FAILURE with instructions, never a silent pass. One environment is
//! shared by all tests of a test binary; a watchdog shell stops the servers (by PID) and removes the
//! scratch folder when the test process exits.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::client::Client;
use crate::kubeconfig::{render_token_kubeconfig, Connection};
use crate::objects::Resource;

pub const DEFAULT_ASSETS: &str = "/var/cache/proxshift/kube-current/bin";
pub const ADMIN_TOKEN: &str = "admin-token-canary-5f1e";
pub const VIEWER_TOKEN: &str = "viewer-token-canary-9c2a";
/// A second cluster-admin token, for kubeconfigs (tests keep it out of no_log options).
pub const KUBECONFIG_TOKEN: &str = "kubeconfig-token-canary-41b7";
/// kube-controller-manager's identity, so its writes are told apart from the tests' and the modules'.
pub const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";
const CONTROLLER_MANAGER_TOKEN: &str = "kcm-token-3e9d";
/// The kubelets' identity ([`Kubelets`]); the audit policy leaves their Lease renewals out.
pub const KUBELETS_USER: &str = "proxshift-test:kubelets";
const KUBELETS_TOKEN: &str = "kubelets-token-77c0";
/// How often the kubelets renew their node Lease (upstream: a tenth of the 40 s lease, 10 s; shorter
/// here to match the shorter [`NODE_MONITOR_GRACE_SECONDS`]).
const LEASE_RENEW_EVERY: Duration = Duration::from_secs(2);
/// A file in [`TestEnv::dir`] listing, one per line, the nodes whose kubelet is stopped.
pub const STOPPED_KUBELETS_FILE: &str = "stopped-kubelets";

pub struct TestEnv {
    pub dir: PathBuf,
    /// `https://127.0.0.1:<port>`
    pub url: String,
    /// The test CA that signed the serving certificate.
    pub ca_path: PathBuf,
    /// Another CA, which did not sign anything the server uses (for "wrong CA" tests).
    pub wrong_ca_path: PathBuf,
    /// Serving certificate and key for 127.0.0.1 signed by `ca_path` (for test HTTPS servers too).
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// A kubeconfig for `system:masters` with a client certificate (installer-style `auth/kubeconfig`).
    pub admin_cert_kubeconfig: PathBuf,
    /// A third CA, the test "ingress" CA: it signed only `ingress_cert`, for the host name `localhost`
    /// (not 127.0.0.1), as the router CA signs the `*.apps` certificate but not the API's.
    pub ingress_ca_path: PathBuf,
    pub ingress_cert: PathBuf,
    pub ingress_key: PathBuf,
    /// The files kube-apiserver serves its named certificate from (`--tls-sni-cert-key` without names:
    /// served to a client that asks by SNI for a DNS name or the CN of the certificate the files hold,
    /// reloaded when they change: k8s.io/apiserver `pkg/server/dynamiccertificates`
    /// `DynamicFileSNIContent`, `BuildNamedCertificates`). As on OpenShift, where the
    /// kube-apiserver-operator serves each of the APIServer's `namedCertificates` from
    /// `/etc/kubernetes/static-pod-certs/secrets/user-serving-cert-NNN/tls.{crt,key}`. At first a copy
    /// of `server_cert` (DNS name `localhost`); 127.0.0.1 (no SNI) always gets `server_cert`.
    pub named_cert: PathBuf,
    pub named_key: PathBuf,
    /// Whether kube-controller-manager runs (always, since 1.34: a missing binary fails the start;
    /// kept for the callers that report it).
    pub controller_manager: bool,
    pids: Vec<u32>,
}

pub fn assets_dir() -> PathBuf {
    std::env::var_os("KUBEBUILDER_ASSETS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_ASSETS))
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

fn run(dir: &Path, cmd: &str) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "test setup command failed: {cmd}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Test CA, a second unrelated CA, a 127.0.0.1 serving certificate, an admin client certificate, an
/// "ingress" CA with a certificate for the host name `localhost` only (the OAuth route's stand-in), and
/// the named serving certificate's files (`user-serving-cert-000/tls.{crt,key}`, at first a copy of the
/// serving certificate: [`TestEnv::named_cert`]).
fn make_pki(dir: &Path) {
    run(
        dir,
        r#"set -e
ca() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $1.key -out $1.crt -days 3650 \
  -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null; }
ca ca proxshift-test-ca; ca wrong-ca proxshift-wrong-ca; ca ingress-ca proxshift-test-ingress-ca
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ingress.key -out ingress.csr -subj "/CN=localhost" 2>/dev/null
printf "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n" > ingress.ext
openssl x509 -req -in ingress.csr -CA ingress-ca.crt -CAkey ingress-ca.key -CAcreateserial -out ingress.crt -days 825 -extfile ingress.ext 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
printf "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n" > server.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 825 -extfile server.ext 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=system:admin" 2>/dev/null
printf "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n" > client.ext
openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 825 -extfile client.ext 2>/dev/null
openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
mkdir user-serving-cert-000; cp server.crt user-serving-cert-000/tls.crt; cp server.key user-serving-cert-000/tls.key
"#,
    );
}

/// Start a server logging to `NAME.log`; its PID. The servers outlive every test of the binary: the
/// watchdog ([`reap_when_done`]), not `wait()`, ends and reaps them.
#[allow(clippy::zombie_processes)]
fn spawn(dir: &Path, name: &str, bin: &Path, args: &[String]) -> u32 {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()))
        .id()
}

fn wait_until(what: &str, dir: &Path, log: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let text = std::fs::read_to_string(dir.join(log)).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(30).collect();
    panic!(
        "{what} did not become ready within {timeout:?}; last log lines:\n{}",
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
}

/// A fresh folder with the PKI, the audit policy and the static tokens the servers use.
fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "proxshift-kube-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    make_pki(&dir);
    // Every request at Metadata level, one event per request: tests read who called what (and
    // what it answered) instead of timing the module.
    std::fs::write(
        dir.join("audit-policy.yaml"),
        format!(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
             - level: None\n  users: [\"{KUBELETS_USER}\"]\n\
             - level: None\n  users: [\"{CONTROLLER_MANAGER_USER}\"]\n  verbs: [get, list, watch]\n\
             - level: Metadata\n"
        ),
    )
    .expect("audit policy");
    std::fs::write(
        dir.join("tokens.csv"),
        format!(
            "{ADMIN_TOKEN},admin,1000,\"system:masters\"\n{VIEWER_TOKEN},viewer,1001,\n\
             {KUBECONFIG_TOKEN},kc-admin,1002,\"system:masters\"\n\
             {CONTROLLER_MANAGER_TOKEN},{CONTROLLER_MANAGER_USER},1003,\"system:masters\"\n\
             {KUBELETS_TOKEN},{KUBELETS_USER},1004,\"system:masters\"\n"
        ),
    )
    .expect("tokens");
    dir
}

fn path_in(dir: &Path, p: &str) -> String {
    dir.join(p).display().to_string()
}

fn start_etcd(dir: &Path, etcd: &Path, client_url: &str) -> u32 {
    let peer_url = format!("http://127.0.0.1:{}", free_port());
    spawn(
        dir,
        "etcd",
        etcd,
        &[
            "--name=t".into(),
            format!("--data-dir={}", path_in(dir, "etcd-data")),
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=t={peer_url}"),
        ],
    )
}

fn start_apiserver(dir: &Path, apiserver: &Path, etcd_url: &str, port: u16) -> u32 {
    let d = |p: &str| path_in(dir, p);
    spawn(
        dir,
        "kube-apiserver",
        apiserver,
        &[
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", d("server.crt")),
            format!("--tls-private-key-file={}", d("server.key")),
            // OpenShift's named certificate (APIServer spec.servingCerts.namedCertificates), served by SNI
            // for the names the certificate holds: see TestEnv::named_cert.
            format!(
                "--tls-sni-cert-key={},{}",
                d("user-serving-cert-000/tls.crt"),
                d("user-serving-cert-000/tls.key")
            ),
            format!("--client-ca-file={}", d("ca.crt")),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-account-key-file={}", d("sa.pub")),
            format!("--service-account-signing-key-file={}", d("sa.key")),
            "--service-cluster-ip-range=10.96.0.0/24".into(),
            "--authorization-mode=RBAC".into(),
            // As OpenShift's kube-apiserver runs (cluster-kube-apiserver-operator's config: `allow-privileged:
            // true`): privileged Pods, a node debug Pod's, are governed by admission (SCC there), not refused.
            "--allow-privileged=true".into(),
            format!("--token-auth-file={}", d("tokens.csv")),
            "--enable-priority-and-fairness=false".into(),
            format!("--audit-policy-file={}", d("audit-policy.yaml")),
            format!("--audit-log-path={}", d("audit.log")),
            "--audit-log-mode=blocking".into(),
        ],
    )
}

/// How long a node may go without a kubelet heartbeat (Lease renewal or status post) before the
/// node-lifecycle controller marks it `Ready=Unknown` and taints it `unreachable`. Upstream's default
/// is 50 s (`--node-monitor-grace-period`, kube-controller-manager 1.32+); the tests' kubelets
/// renew every 2 s, so 20 s keeps dead-node tests short without judging a live node dead.
pub const NODE_MONITOR_GRACE_SECONDS: u64 = 20;

/// The controllers a cluster runs that the project meets: CSR signing (an approved CSR gets its
/// certificate, signed by the test CA as the cluster's kubelet signer), node lifecycle, garbage
/// collection, namespace deletion, service-account tokens. Controller names as
/// `kube-controller-manager --controllers` lists them (k8s.io/kubernetes
/// `cmd/kube-controller-manager/names`). Not run: the taint-eviction controller (pods tolerate the
/// `unreachable` taint for 300 s by default, longer than any test), pod GC, and everything that needs
/// a cloud, a scheduler or kubelets running containers.
pub const CONTROLLERS: &[&str] = &[
    "certificatesigningrequest-signing-controller",
    "node-lifecycle-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-token-controller",
    "serviceaccount-controller",
];

fn start_controller_manager(dir: &Path, kcm: &Path) -> u32 {
    let d = |p: &str| path_in(dir, p);
    spawn(
        dir,
        "kube-controller-manager",
        kcm,
        &[
            format!("--kubeconfig={}", d("controller-manager.kubeconfig")),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()),
            "--leader-elect=false".into(),
            format!("--controllers={}", CONTROLLERS.join(",")),
            format!("--service-account-private-key-file={}", d("sa.key")),
            format!("--root-ca-file={}", d("ca.crt")),
            format!("--cluster-signing-cert-file={}", d("ca.crt")),
            format!("--cluster-signing-key-file={}", d("ca.key")),
            "--node-monitor-period=2s".into(),
            format!("--node-monitor-grace-period={NODE_MONITOR_GRACE_SECONDS}s"),
        ],
    )
}

/// The watchdog: stop the servers by PID (and remove their folder) once this test process is gone.
/// It outlives this process on purpose, so nobody waits for it.
#[allow(clippy::zombie_processes)]
fn reap_when_done(dir: &Path, pids: &[u32]) {
    let me = std::process::id();
    let list = pids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(" ");
    Command::new("bash")
        .arg("-c")
        .arg(format!(
            "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; kill {list} 2>/dev/null; sleep 3; kill -9 {list} 2>/dev/null; rm -rf '{}'",
            dir.display()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("watchdog");
}

impl TestEnv {
    /// The environment shared by this test binary, started on first use.
    pub fn shared() -> &'static TestEnv {
        static ENV: OnceLock<TestEnv> = OnceLock::new();
        ENV.get_or_init(TestEnv::start)
    }

    /// [`TestEnv::shared`] with the repository's fixture CRDs installed (once).
    pub fn with_crds() -> &'static TestEnv {
        static CRDS: std::sync::Once = std::sync::Once::new();
        let env = TestEnv::shared();
        CRDS.call_once(|| env.install_crds(&fixture_crds()));
        env
    }

    fn start() -> TestEnv {
        let assets = assets_dir();
        let (apiserver, etcd, kcm) = (
            assets.join("kube-apiserver"),
            assets.join("etcd"),
            assets.join("kube-controller-manager"),
        );
        for b in [&apiserver, &etcd, &kcm] {
            assert!(
                b.is_file(),
                "{} is missing. These tests need a real etcd, kube-apiserver and kube-controller-manager: \
                 run `scripts/deps/kube.sh` (builds Kubernetes 1.34 and etcd 3.6 from Go modules, minutes \
                 once, cached in {DEFAULT_ASSETS}) or set KUBEBUILDER_ASSETS to a folder with all three.",
                b.display()
            );
        }
        let dir = scratch_dir();
        let etcd_url = format!("http://127.0.0.1:{}", free_port());
        let etcd_pid = start_etcd(&dir, &etcd, &etcd_url);
        let port = free_port();
        let api_pid = start_apiserver(&dir, &apiserver, &etcd_url, port);
        let pids = vec![etcd_pid, api_pid];
        reap_when_done(&dir, &pids);
        let url = format!("https://127.0.0.1:{port}");
        let mut env = TestEnv {
            ca_path: dir.join("ca.crt"),
            wrong_ca_path: dir.join("wrong-ca.crt"),
            server_cert: dir.join("server.crt"),
            server_key: dir.join("server.key"),
            admin_cert_kubeconfig: dir.join("admin-cert.kubeconfig"),
            ingress_ca_path: dir.join("ingress-ca.crt"),
            ingress_cert: dir.join("ingress.crt"),
            ingress_key: dir.join("ingress.key"),
            named_cert: dir.join("user-serving-cert-000/tls.crt"),
            named_key: dir.join("user-serving-cert-000/tls.key"),
            dir: dir.clone(),
            url,
            controller_manager: false,
            pids,
        };
        let admin = env.client(ADMIN_TOKEN);
        wait_until(
            "kube-apiserver",
            &dir,
            "kube-apiserver.log",
            Duration::from_secs(90),
            || {
                admin
                    .get_text("/readyz")
                    .map(|t| t.trim() == "ok")
                    .unwrap_or(false)
            },
        );
        env.write_kubeconfigs();
        let pid = start_controller_manager(&dir, &kcm);
        env.pids.push(pid);
        reap_when_done(&dir, &[pid]);
        env.controller_manager = true;
        Kubelets::start(env.client(KUBELETS_TOKEN), dir.join(STOPPED_KUBELETS_FILE));
        env
    }

    /// Stop the kubelet of `node`: its Lease is no longer renewed, so the node-lifecycle controller
    /// marks it `Ready=Unknown` and taints it `unreachable` after [`NODE_MONITOR_GRACE_SECONDS`].
    pub fn stop_kubelet(&self, node: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(STOPPED_KUBELETS_FILE))
            .expect("stopped-kubelets file");
        writeln!(f, "{node}").expect("stopped-kubelets file");
    }

    /// `admin.kubeconfig` (bearer token) and the client-certificate kubeconfig.
    fn write_kubeconfigs(&self) {
        let dir = &self.dir;
        std::fs::write(dir.join("admin.kubeconfig"), self.kubeconfig(ADMIN_TOKEN))
            .expect("kubeconfig");
        std::fs::write(
            dir.join("controller-manager.kubeconfig"),
            self.kubeconfig(CONTROLLER_MANAGER_TOKEN),
        )
        .expect("kubeconfig");
        let b64 = |p: &str| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .encode(std::fs::read(dir.join(p)).expect("pem"))
        };
        let cert_kc = json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "test", "cluster": {"server": self.url, "certificate-authority-data": b64("ca.crt")}}],
            "users": [{"name": "admin", "user": {"client-certificate-data": b64("admin.crt"), "client-key-data": b64("admin.key")}}],
            "contexts": [{"name": "admin", "context": {"cluster": "test", "user": "admin"}}],
            "current-context": "admin",
        });
        std::fs::write(
            &self.admin_cert_kubeconfig,
            serde_yaml_ng::to_string(&cert_kc).expect("yaml"),
        )
        .expect("kubeconfig");
    }

    /// The API server's audit log so far: one event (JSON) per request, in the order they completed.
    /// `user.username`, `verb`, `requestURI` and `responseStatus.code` say who asked for what and
    /// what they got.
    pub fn audit_events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The audit events `matching`, once there is at least one (the server writes an event after it
    /// has answered, so the newest may lag the caller by a moment); panics after 30 s without one.
    pub fn audited(&self, matching: impl Fn(&Value) -> bool) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let found: Vec<Value> = self.audit_events().into_iter().filter(&matching).collect();
            if !found.is_empty() || start.elapsed() > Duration::from_secs(30) {
                assert!(!found.is_empty(), "no matching audit event in 30 s");
                return found;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A connection with a bearer token, verifying the server with the test CA.
    pub fn connection(&self, token: &str) -> Connection {
        Connection {
            server: self.url.clone(),
            token: Some(token.into()),
            tls: proxshift_http::Tls {
                validate_certs: true,
                ca_path: Some(self.ca_path.clone()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    pub fn client(&self, token: &str) -> Client {
        let mut c = Client::new(&self.connection(token)).expect("client");
        c.set_backoff(proxshift_http::Backoff::none());
        c
    }

    pub fn admin(&self) -> Client {
        self.client(ADMIN_TOKEN)
    }

    /// kubeconfig text for a token user, with the CA inline.
    pub fn kubeconfig(&self, token: &str) -> String {
        let ca = std::fs::read(&self.ca_path).expect("ca");
        render_token_kubeconfig(&self.url, Some(&ca), false, token, "test")
    }

    /// Create (or replace) CRDs from YAML files and wait until they are Established.
    pub fn install_crds(&self, files: &[PathBuf]) {
        let admin = self.admin();
        let crd = Resource::new(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
        );
        for f in files {
            let text =
                std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            for doc in crate::objects::parse_documents(&text).expect("CRD yaml") {
                let name = doc
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .expect("CRD name")
                    .to_string();
                if admin.get(&crd, None, &name).expect("get CRD").is_none() {
                    if let Err(e) = admin.create(&crd, None, &doc) {
                        if !e.is_conflict() {
                            panic!("installing CRD {name} from {}: {e}", f.display());
                        }
                    }
                }
                admin
                    .wait_for_conditions(
                        &crd,
                        None,
                        &name,
                        &[("Established", "True")],
                        Duration::from_secs(30),
                        Duration::from_millis(200),
                    )
                    .unwrap_or_else(|e| panic!("CRD {name}: {e}"));
            }
        }
        // Discovery of new groups lags a moment behind Established.
        std::thread::sleep(Duration::from_millis(500));
    }

    pub fn pids(&self) -> &[u32] {
        &self.pids
    }
}

/// The kubelets of every Node in the cluster, reduced to what the control plane sees of a running
/// kubelet: it renews its Lease `kube-node-lease/<node>` (owned by the Node, so the garbage collector
/// removes it with the Node), as the kubelet's `nodelease` controller does
/// (k8s.io/component-helpers `apimachinery/lease` controller, used by `pkg/kubelet/kubelet.go`).
/// A Node appears with a kubelet running; [`TestEnv::stop_kubelet`] stops one for good. Node status
/// (conditions, addresses) stays the tests' to write, as each scenario needs.
struct Kubelets;

impl Kubelets {
    #[allow(clippy::new_ret_no_self)]
    fn start(client: Client, stopped_file: PathBuf) {
        std::thread::spawn(move || loop {
            let stopped = std::fs::read_to_string(&stopped_file).unwrap_or_default();
            let stopped: Vec<&str> = stopped.lines().map(str::trim).collect();
            if let Ok(nodes) = client.list(&crate::objects::known::nodes(), None, None) {
                for node in nodes {
                    let name = node.pointer("/metadata/name").and_then(Value::as_str);
                    let uid = node.pointer("/metadata/uid").and_then(Value::as_str);
                    if let (Some(name), Some(uid)) = (name, uid) {
                        if !stopped.contains(&name) {
                            // A node deleted meanwhile, a conflict: the next round renews.
                            let _ = Self::renew(&client, name, uid);
                        }
                    }
                }
            }
            std::thread::sleep(LEASE_RENEW_EVERY);
        });
    }

    fn renew(client: &Client, node: &str, uid: &str) -> Result<(), crate::KubeError> {
        let leases = Resource::new("coordination.k8s.io/v1", "Lease", "leases", true);
        let now = humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string();
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": "kube-node-lease", "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now},
        });
        client
            .apply_as(
                &leases,
                Some("kube-node-lease"),
                node,
                &lease,
                "kubelet",
                true,
                false,
            )
            .map(drop)
    }
}

/// The CRDs the repository carries for tests (`tests/fixtures/crds/*.yaml`, upstream copies).
pub fn fixture_crds() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/crds");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

/// A name unique within this test process (tests share one API server).
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}", N.fetch_add(1, Ordering::SeqCst))
}

/// The repository's fake OpenShift OAuth/API endpoint (`tests/fixtures/fake_openshift_oauth.py`),
/// served over HTTPS with the test CA's 127.0.0.1 certificate. Stopped when dropped.
pub struct FakeOAuth {
    /// The fake API (discovery, `users/~`, token revocation).
    pub url: String,
    /// With [`FakeOAuth::start_routed`]: the separate OAuth server, `https://localhost:<port>`,
    /// served with the ingress CA's certificate.
    pub oauth_url: Option<String>,
    child: Child,
}

impl FakeOAuth {
    /// Start it with one `user:password` login; `challenge=false` makes it refuse to offer Basic login.
    pub fn start(env: &TestEnv, user: &str, password: &str, challenge: bool) -> FakeOAuth {
        Self::start_on(env, user, password, challenge, 0)
    }

    /// The same on a given port (0: any free one).
    pub fn start_on(
        env: &TestEnv,
        user: &str,
        password: &str,
        challenge: bool,
        port: u16,
    ) -> FakeOAuth {
        Self::spawn(env, user, password, challenge, port, false)
    }

    /// As on a real cluster: the API (127.0.0.1, test CA) names an OAuth server on another host
    /// name (`localhost`) served with another CA ([`TestEnv::ingress_ca_path`]).
    pub fn start_routed(env: &TestEnv, user: &str, password: &str) -> FakeOAuth {
        Self::spawn(env, user, password, true, 0, true)
    }

    fn spawn(
        env: &TestEnv,
        user: &str,
        password: &str,
        challenge: bool,
        port: u16,
        routed: bool,
    ) -> FakeOAuth {
        use std::io::BufRead;
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/fake_openshift_oauth.py");
        let mut cmd = Command::new("python3");
        cmd.arg(&script)
            .arg("--cert")
            .arg(&env.server_cert)
            .arg("--key")
            .arg(&env.server_key)
            .arg("--user")
            .arg(format!("{user}:{password}"))
            .arg("--port")
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if !challenge {
            cmd.arg("--no-challenge");
        }
        if routed {
            cmd.arg("--oauth-cert")
                .arg(&env.ingress_cert)
                .arg("--oauth-key")
                .arg(&env.ingress_key);
        }
        let mut child = cmd.spawn().expect("python3 for the fake OAuth server");
        let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut read_port = |prefix: &str| {
            let mut line = String::new();
            out.read_line(&mut line).expect("fake OAuth server output");
            line.trim()
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("fake OAuth server said {line:?}"))
                .to_string()
        };
        let port = read_port("PORT ");
        let oauth_url = routed.then(|| format!("https://localhost:{}", read_port("OAUTH_PORT ")));
        FakeOAuth {
            url: format!("https://127.0.0.1:{port}"),
            oauth_url,
            child,
        }
    }
}

impl Drop for FakeOAuth {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
