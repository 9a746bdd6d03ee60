//! `pvesim` command line.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

const AFTER_HELP: &str = "\
SEEDING
  --seed FILE loads the cluster from YAML or JSON: nodes (cpus, maxmem, online), storages per
  node (type dir/lvmthin/lvm/nfs/zfspool, content, size, free, shared, files), VMs and templates
  (raw config keys, running, agent_ips, agent_delay, ignore_shutdown, ha), users, API tokens
  (privsep true/false), roles and ACLs. Without --seed the built-in 3-node lab is used
  (examples/lab.yaml). --dump-state FILE writes the final state in the same format on exit.

TLS
  --tls generates a CA and a server certificate for localhost/127.0.0.1 signed by it and writes
  the CA to --ca-out (default ./pvesim-ca.pem) for clients' ca_path. --cert/--key serve given PEM
  files instead. Without either, plain HTTP.

TIME
  Task durations are realistic seconds (create ~2 s, start ~2 s, shutdown ~5 s, full clone
  +1 s/GiB, …) multiplied by --time-scale (0 = instant, 0.1 = ten times faster). The guest agent
  answers --agent-delay seconds (also scaled) after a start. Simulated time can also be moved
  forward with POST /_pvesim/clock/advance {\"seconds\": N}.

FAULT INJECTION
  --scenario FILE applies a list of faults at start, e.g.
    faults:
      - fail_tasks: {type: qmclone, count: 1, message: \"clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout\"}
      - http_error: {path: /cluster/nextid, method: GET, status: 500, message: boom, count: 2}
      - latency: {path: /nodes, ms: 200}
      - node_offline: {node: pve3}
      - stale_lock: {vmid: 101, lock: backup}
      - hold_file_lock: {vmid: 100, seconds: 30}
      - fill_storage: {node: pve1, storage: local-lvm, free: 0}
  The same objects can be POSTed (one or a list) to /_pvesim/faults at run time.

ADMIN API (under /_pvesim, no authentication)
  GET /health · GET|DELETE /requests[?since=SEQ] · GET /state · GET /tasks ·
  GET|POST|DELETE /faults · GET|PUT /options · POST /clock/advance

The Proxmox API itself is served under /api2/json with PVE's paths, parameters, encodings,
envelopes, error bodies (`message` from PVE 8.3.4 on; --old-errors drops it as an older
libpve-http-server-perl does) and 401 delay.
/version reports --pve-version (default: the seed's cluster.version, 9.2.11).";

/// Proxmox VE API simulator.
#[derive(Parser, Debug)]
#[command(name = "pvesim", version, about, after_help = AFTER_HELP)]
struct Cli {
    /// Address to listen on (port 0 = ephemeral; the chosen address is printed).
    #[arg(long, default_value = "127.0.0.1:8006")]
    listen: SocketAddr,
    /// Seed file (YAML or JSON); default: the built-in 3-node lab.
    #[arg(long)]
    seed: Option<PathBuf>,
    /// Write the state to this file (YAML) on exit.
    #[arg(long)]
    dump_state: Option<PathBuf>,
    /// Serve HTTPS with a generated CA and server certificate.
    #[arg(long)]
    tls: bool,
    /// Where --tls writes the CA certificate.
    #[arg(long, default_value = "pvesim-ca.pem")]
    ca_out: PathBuf,
    /// Serve HTTPS with this certificate chain (PEM); needs --key.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// Private key (PEM) for --cert.
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Task duration factor: 0 = instant, 1 = realistic.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Seconds (before scaling) from VM start until the guest agent answers.
    #[arg(long, default_value_t = 20.0)]
    agent_delay: f64,
    /// Seconds (before scaling) after the agent is up during which it reports only
    /// link-local IPv6 addresses.
    #[arg(long, default_value_t = 0.0)]
    agent_ip_delay: f64,
    /// Config file lock timeout in seconds (before scaling).
    #[arg(long, default_value_t = 10.0)]
    lock_timeout: f64,
    /// Concurrent clones onto one storage beyond this fail with the storage lock timeout
    /// (0 = unlimited).
    #[arg(long, default_value_t = 0)]
    max_parallel_clones: u32,
    /// Delay before every 401 answer, in milliseconds (PVE: about 3000).
    #[arg(long, default_value_t = 3000)]
    auth_delay_ms: u64,
    /// Old error bodies: `{"data":null}` without `message` (libpve-http-server-perl < 5.2.0,
    /// as before PVE 8.3.4).
    #[arg(long)]
    old_errors: bool,
    /// Do not fail VM starts on memory-overcommitted nodes.
    #[arg(long)]
    no_memory_check: bool,
    /// The Proxmox VE release to play (MAJOR.MINOR[.PATCH], 8.x or 9.x); overrides the
    /// seed's `cluster.version` (default 9.2.11). `/version` reports it.
    #[arg(long)]
    pve_version: Option<pvesim::PveVersion>,
    /// Fault scenario file (YAML/JSON) applied at start.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Directory in which uploads are spooled while they arrive (PVE: /var/tmp); the simulator
    /// makes its own directory there and removes it on exit. Default: the system temp dir.
    #[arg(long)]
    upload_dir: Option<PathBuf>,
}

/// What stops the binary; printed as `pvesim: <error>`.
#[derive(Debug, thiserror::Error)]
enum MainError {
    #[error(transparent)]
    SeedFile(#[from] pvesim::SeedFileError),
    #[error(transparent)]
    Scenario(#[from] pvesim::ScenarioError),
    #[error(transparent)]
    Start(#[from] pvesim::StartError),
    #[error("{0}")]
    Runtime(#[source] std::io::Error),
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("pvesim: {e}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<(), MainError> {
    let mut seed = match &cli.seed {
        Some(p) => pvesim::Seed::from_file(p)?,
        None => pvesim::Seed::lab(),
    };
    if let Some(v) = cli.pve_version {
        seed.cluster.version = v.to_string();
    }
    let faults = match &cli.scenario {
        Some(p) => pvesim::Scenario::from_file(p)?.faults,
        None => Vec::new(),
    };
    let tls = match (&cli.cert, &cli.key, cli.tls) {
        (Some(c), Some(k), _) => pvesim::Tls::Files {
            cert: c.clone(),
            key: k.clone(),
        },
        (_, _, true) => pvesim::Tls::Generated {
            ca_path: Some(cli.ca_out.clone()),
        },
        _ => pvesim::Tls::None,
    };
    let options = pvesim::Options {
        time_scale: cli.time_scale,
        error_message: !cli.old_errors,
        auth_failure_delay_ms: cli.auth_delay_ms,
        check_memory_on_start: !cli.no_memory_check,
        agent_delay: cli.agent_delay,
        agent_ip_delay: cli.agent_ip_delay,
        lock_timeout: cli.lock_timeout,
        max_parallel_clones_per_storage: cli.max_parallel_clones,
        ..pvesim::Options::default()
    };
    let config = pvesim::Config {
        seed,
        options,
        tls,
        bind: cli.listen,
        faults,
        dump_on_exit: cli.dump_state.clone(),
        upload_dir: cli.upload_dir.clone(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(MainError::Runtime)?;
    rt.block_on(async move {
        let bound = pvesim::Simulator::bind(config).await?;
        // Take SIGINT and SIGTERM over before announcing the address: whoever reads that line may
        // stop pvesim at once (`ctrl_c()` would only install its handler when first polled, inside
        // `serve`). Either signal ends serving normally (state dump, upload spool removed).
        use tokio::signal::unix::{signal, SignalKind};
        let mut sigint = signal(SignalKind::interrupt()).map_err(MainError::Runtime)?;
        let mut sigterm = signal(SignalKind::terminate()).map_err(MainError::Runtime)?;
        let scheme = if bound.https { "https" } else { "http" };
        println!("pvesim listening on {scheme}://{}/api2/json", bound.addr);
        if bound.ca_pem.is_some() {
            println!("CA certificate written to {}", cli.ca_out.display());
        }
        bound
            .serve(async move {
                tokio::select! {
                    _ = sigint.recv() => {}
                    _ = sigterm.recv() => {}
                }
            })
            .await;
        Ok(())
    })
}
