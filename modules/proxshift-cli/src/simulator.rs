//! The `pvesim` process a rehearsal runs against: finding the binary, starting it with TLS and a
//! throwaway token, reading the address it listens on, and stopping it so it writes its final state.

use std::path::{Path, PathBuf};

use crate::app::{env_var, is_executable};
use crate::exit::CliError;

/// A throwaway token secret for the simulator (not a credential anywhere else), UUID-shaped.
pub(crate) fn simulator_secret() -> String {
    // splitmix64 over the clock and the pid: unpredictable enough for a local simulator.
    fn mix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let a = mix(nanos ^ u64::from(std::process::id()));
    let h = format!("{a:016x}{:016x}", mix(a));
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The pvesim binary: --pvesim / PVESIM_BIN, next to this executable, on PATH, in the checkout's
/// build/bin (where `make build` installs it) or target folders.
pub(crate) fn find_pvesim(given: Option<&Path>, root: &Path) -> Result<PathBuf, CliError> {
    if let Some(p) = given {
        return if is_executable(p) {
            Ok(p.to_path_buf())
        } else {
            Err(CliError::tool(format!(
                "pvesim not found at {}",
                p.display()
            )))
        };
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("pvesim")));
    let targets = [
        "build/bin",
        "target/x86_64-unknown-linux-gnu/tools",
        "target/x86_64-unknown-linux-gnu/release",
        "target/release",
        "target/debug",
    ];
    beside
        .into_iter()
        .chain(
            env_var("PATH")
                .as_deref()
                .into_iter()
                .flat_map(std::env::split_paths)
                .map(|d| d.join("pvesim")),
        )
        .chain(targets.iter().map(|t| root.join(t).join("pvesim")))
        .find(|p| is_executable(p))
        .ok_or_else(|| {
            CliError::tool(
                "pvesim not found (next to proxshift, on PATH, in build/bin or target/): build it with `make build` or pass --pvesim",
            )
        })
}

/// A running simulator: stopped with SIGINT so it writes its final state.
pub(crate) struct RunningSim {
    child: std::process::Child,
    pub(crate) addr: String,
}

impl RunningSim {
    pub(crate) fn start(
        bin: &Path,
        listen: &str,
        seed: &str,
        ca: &str,
        dump: &str,
    ) -> Result<Self, CliError> {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(bin);
        // SIGINT is how `stop` asks for the final state, so the simulator must be able to receive it even
        // when this process started with SIGINT ignored (`nohup … &`, a non-interactive shell's background
        // job): an ignored disposition survives exec, and a shell cannot trap what it inherited ignored.
        // SAFETY: `signal` is async-signal-safe, as code between fork and exec must be.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = cmd
            .args([
                "--listen",
                listen,
                "--seed",
                seed,
                "--tls",
                "--ca-out",
                ca,
                "--time-scale",
                "0",
                "--auth-delay-ms",
                "0",
                "--dump-state",
                dump,
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| CliError::tool(format!("cannot start {}: {e}", bin.display())))?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if !sent {
                    if let Some(url) = line.strip_prefix("pvesim listening on ") {
                        let _ = tx.send(url.to_string());
                        sent = true;
                    }
                }
            }
        });
        match rx.recv_timeout(std::time::Duration::from_secs(30)) {
            Ok(url) => {
                let addr = url
                    .trim_start_matches("https://")
                    .trim_end_matches("/api2/json")
                    .to_string();
                Ok(RunningSim { child, addr })
            }
            Err(_) => {
                let _ = child.kill();
                let out = child.wait_with_output().ok();
                let err = out
                    .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                    .unwrap_or_default();
                Err(CliError::tool(format!(
                    "pvesim did not start: {}",
                    err.trim()
                )))
            }
        }
    }

    pub(crate) fn stop(mut self) {
        // SIGINT: pvesim shuts down cleanly and writes --dump-state.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGINT);
        }
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
