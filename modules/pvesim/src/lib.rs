//! `pvesim`: a Proxmox VE API simulator for tests, demos and rehearsals.
//!
//! In-process use from Rust tests:
//!
//! ```no_run
//! let sim = pvesim::Simulator::start(pvesim::Config::default()).unwrap();
//! let base = sim.api_url(); // http://127.0.0.1:<port>/api2/json
//! // … drive it with any HTTP client, token `root@pam!pvesim=<secret>` from the lab seed …
//! assert!(sim.writes().is_empty());
//! sim.shutdown();
//! ```

pub mod admin;
pub mod auth;
pub mod config_perm;
pub mod error;
pub mod faults;
pub mod ha;
mod handlers;
pub mod model;
pub mod multipart;
pub mod ops;
pub mod propstr;
pub mod receive;
pub mod schema;
pub mod server;
pub mod sim;
pub mod spool;
pub mod tasks;
pub mod tls;
pub mod vmconfig;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

pub use faults::{Fault, FaultError, Scenario, ScenarioError};
pub use model::{Seed, SeedFileError};
pub use sim::{Generation, Options, PveVersion, RequestRecord, SeedError, Sim};

use server::Shared;

/// Credentials of the built-in lab seed (`examples/lab.yaml`).
pub mod lab {
    /// `root@pam` password.
    pub const ROOT_PASSWORD: &str = "pvesim-root-password";
    /// Token with full root rights (no privilege separation): `PVEAPIToken=<ROOT_TOKEN>`.
    pub const ROOT_TOKEN: &str = "root@pam!pvesim=5e1e0c5a-7d2b-4c4e-9a51-000000000001";
    pub const ROOT_TOKEN_ID: &str = "root@pam!pvesim";
    pub const ROOT_TOKEN_SECRET: &str = "5e1e0c5a-7d2b-4c4e-9a51-000000000001";
    /// `ansible@pve` password (role ProxShiftProvisioner on `/`).
    pub const ANSIBLE_PASSWORD: &str = "pvesim-ansible-password";
    /// Privilege-separated token of ansible@pve (PVEVMAdmin on /vms, PVEDatastoreUser on
    /// /storage, PVEAuditor on /nodes).
    pub const CI_TOKEN: &str = "ansible@pve!ci=5e1e0c5a-7d2b-4c4e-9a51-000000000002";
    /// ansible@pve's token without privilege separation.
    pub const FULL_TOKEN: &str = "ansible@pve!full=5e1e0c5a-7d2b-4c4e-9a51-000000000003";

    /// The environment variable naming the PVE release the module test suites play (e.g.
    /// `8.4.1`); unset means the newest ([`crate::PveVersion::CURRENT`]). `make test` runs the
    /// pvesim-backed module suites once unset and once more with a PVE 8 release.
    pub const VERSION_ENV: &str = "PVESIM_PVE_VERSION";

    /// The release named by [`VERSION_ENV`], or the newest. For test suites: a value that does
    /// not parse is a broken test setup, so it panics naming the variable.
    pub fn release_under_test() -> crate::PveVersion {
        match std::env::var(VERSION_ENV) {
            Ok(v) if !v.trim().is_empty() => v
                .parse()
                .unwrap_or_else(|e| panic!("{VERSION_ENV}={v}: {e}")),
            _ => crate::PveVersion::CURRENT,
        }
    }

    /// The lab seed (`examples/lab.yaml`) playing [`release_under_test`].
    pub fn seed_under_test() -> crate::Seed {
        let mut seed = crate::Seed::lab();
        seed.cluster.version = release_under_test().to_string();
        seed
    }

    /// [`crate::Config::default`] with the lab seed playing [`release_under_test`].
    pub fn config_under_test() -> crate::Config {
        crate::Config::with_seed(seed_under_test())
    }
}

/// How the simulator serves HTTP.
#[derive(Debug, Clone, Default)]
pub enum Tls {
    /// Plain HTTP.
    #[default]
    None,
    /// A generated CA + server certificate; the CA PEM is written to `ca_path` if given
    /// and is always available from `SimHandle::ca_pem`.
    Generated { ca_path: Option<PathBuf> },
    /// Certificate chain and key PEM files.
    Files { cert: PathBuf, key: PathBuf },
}

/// Everything needed to start a simulator.
#[derive(Debug, Clone)]
pub struct Config {
    pub seed: Seed,
    pub options: Options,
    pub tls: Tls,
    /// Default `127.0.0.1:0` (ephemeral port).
    pub bind: SocketAddr,
    /// Faults applied at start (e.g. from a scenario file).
    pub faults: Vec<Fault>,
    /// Write the final state (seed format, YAML) here on shutdown.
    pub dump_on_exit: Option<PathBuf>,
    /// Where the upload spool directory goes (default: the system temp dir).
    pub upload_dir: Option<PathBuf>,
}

impl Default for Config {
    /// The 3-node lab seed, instant tasks, no 401 delay, plain HTTP, ephemeral port.
    fn default() -> Self {
        Config {
            seed: Seed::lab(),
            options: Options::default(),
            tls: Tls::None,
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            faults: Vec::new(),
            dump_on_exit: None,
            upload_dir: None,
        }
    }
}

impl Config {
    pub fn with_seed(seed: Seed) -> Config {
        Config {
            seed,
            ..Config::default()
        }
    }
}

/// A bound, not yet serving simulator (used by the binary and by `Simulator::start`).
pub struct Bound {
    listener: TcpListener,
    shared: Arc<Shared>,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    pub addr: SocketAddr,
    pub ca_pem: Option<String>,
    pub https: bool,
    dump_on_exit: Option<PathBuf>,
}

pub struct Simulator;

/// Why a simulator did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Seed(#[from] SeedError),
    #[error(transparent)]
    Fault(#[from] FaultError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("cannot write {path}: {source}")]
    WriteCa {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the simulator thread ended before it was ready")]
    Vanished,
}

impl Simulator {
    /// Builds the state and binds the listener (inside a Tokio runtime).
    pub async fn bind(config: Config) -> Result<Bound, StartError> {
        let mut sim = Sim::new(config.seed, config.options)?;
        for f in config.faults {
            sim.apply_fault(f)?;
        }
        let (acceptor, ca_pem) = match &config.tls {
            Tls::None => (None, None),
            Tls::Generated { ca_path } => {
                let m = tls::generate()?;
                if let (Some(p), Some(ca)) = (ca_path, &m.ca_pem) {
                    std::fs::write(p, ca).map_err(|source| StartError::WriteCa {
                        path: p.clone(),
                        source,
                    })?;
                }
                (Some(tls::server_config(&m)?), m.ca_pem)
            }
            Tls::Files { cert, key } => {
                let m = tls::from_files(cert, key)?;
                (Some(tls::server_config(&m)?), None)
            }
        };
        let listener = TcpListener::bind(config.bind)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.bind,
                source,
            })?;
        let addr = listener.local_addr()?;
        Ok(Bound {
            listener,
            shared: Arc::new(Shared {
                sim: Mutex::new(sim),
                spool: spool::Spool::new(&config.upload_dir.unwrap_or_else(std::env::temp_dir)),
            }),
            https: acceptor.is_some(),
            acceptor: acceptor.map(tokio_rustls::TlsAcceptor::from),
            addr,
            ca_pem,
            dump_on_exit: config.dump_on_exit,
        })
    }

    /// Starts a simulator on its own thread and runtime; returns once it accepts connections.
    pub fn start(config: Config) -> Result<SimHandle, StartError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("pvesim".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(StartError::Io(e)));
                        return;
                    }
                };
                rt.block_on(async move {
                    match Simulator::bind(config).await {
                        Ok(b) => {
                            let info = (b.addr, b.https, b.ca_pem.clone(), b.shared.clone());
                            let _ = tx.send(Ok(info));
                            b.serve(async {
                                let _ = stop_rx.await;
                            })
                            .await;
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                });
            })?;
        let (addr, https, ca_pem, shared) = rx.recv().map_err(|_| StartError::Vanished)??;
        Ok(SimHandle {
            addr,
            https,
            ca_pem,
            shared,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }
}

impl Bound {
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Serves until `shutdown` completes, then dumps state if configured.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) {
        let Bound {
            listener,
            shared,
            acceptor,
            dump_on_exit,
            ..
        } = self;
        tokio::pin!(shutdown);
        loop {
            let (stream, _) = tokio::select! {
                _ = &mut shutdown => break,
                r = listener.accept() => match r {
                    Ok(x) => x,
                    Err(_) => continue,
                },
            };
            let _ = stream.set_nodelay(true);
            let shared = shared.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| server::handle(shared.clone(), req));
                let http = hyper::server::conn::http1::Builder::new();
                match acceptor {
                    Some(a) => {
                        if let Ok(tls) = a.accept(stream).await {
                            let _ = http.serve_connection(TokioIo::new(tls), svc).await;
                        }
                    }
                    None => {
                        let _ = http.serve_connection(TokioIo::new(stream), svc).await;
                    }
                }
            });
        }
        if let Some(path) = dump_on_exit {
            let seed = shared.lock().dump();
            match serde_yaml_ng::to_string(&seed) {
                Ok(text) => {
                    if let Err(e) = std::fs::write(&path, text) {
                        eprintln!("pvesim: cannot write state dump {}: {e}", path.display());
                    }
                }
                Err(e) => eprintln!("pvesim: cannot serialise state: {e}"),
            }
        }
    }
}

/// A running in-process simulator. Dropping it shuts it down.
pub struct SimHandle {
    addr: SocketAddr,
    https: bool,
    ca_pem: Option<String>,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SimHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// `http(s)://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }
    /// `http(s)://127.0.0.1:<port>/api2/json`
    pub fn api_url(&self) -> String {
        format!("{}{}", self.url(), server::API_PREFIX)
    }
    /// The generated CA certificate (PEM), when serving with `Tls::Generated`.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }
    /// The directory uploads are spooled in while they arrive (made at the first upload).
    pub fn upload_dir(&self) -> PathBuf {
        self.shared.spool.dir().to_path_buf()
    }
    /// Runs `f` on the state (with due tasks completed first).
    pub fn with_sim<R>(&self, f: impl FnOnce(&mut Sim) -> R) -> R {
        let mut sim = self.shared.lock();
        sim.tick();
        f(&mut sim)
    }
    /// Every request recorded so far.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.with_sim(|s| s.requests.clone())
    }
    /// Recorded POST/PUT/DELETE requests — empty after a check-mode run.
    pub fn writes(&self) -> Vec<RequestRecord> {
        self.with_sim(|s| {
            s.requests
                .iter()
                .filter(|r| r.is_write())
                .cloned()
                .collect()
        })
    }
    pub fn clear_requests(&self) {
        self.with_sim(|s| s.requests.clear())
    }
    pub fn inject(&self, fault: Fault) -> Result<(), FaultError> {
        self.with_sim(|s| s.apply_fault(fault))
    }
    pub fn clear_faults(&self) {
        self.with_sim(|s| s.faults.armed.clear())
    }
    pub fn options(&self) -> Options {
        self.with_sim(|s| s.opts.clone())
    }
    pub fn set_options(&self, opts: Options) {
        self.with_sim(|s| s.opts = opts)
    }
    /// Moves simulated time forward (finishes due tasks, readies guest agents).
    pub fn advance(&self, d: Duration) {
        self.with_sim(|s| s.advance(d))
    }
    /// A VM's applied config (`current=1` view), if it exists.
    pub fn vm_config(&self, vmid: u32) -> Option<BTreeMap<String, String>> {
        self.with_sim(|s| s.vms.get(&vmid).map(|v| v.conf.clone()))
    }
    /// The state in seed format.
    pub fn dump(&self) -> Seed {
        self.with_sim(|s| s.dump())
    }
    /// Stops serving and waits for the server thread.
    pub fn shutdown(mut self) {
        self.stop_now();
    }
    fn stop_now(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.stop_now();
    }
}
