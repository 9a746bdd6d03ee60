//! A real S3 server for integration tests (feature `test-support`): `s3s-fs`, which serves a folder
//! through the S3 API and checks every request's Signature V4 (header and presigned) against its one
//! key pair. `scripts/deps/s3s.sh` builds it; the tests find it through `S3S_FS_BIN`, else that
//! script's cache. When neither exists the test FAILS saying how to get it: a skipped server test would
//! look like a passing one.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{Credentials, StoreOptions};

pub const ACCESS_KEY: &str = "proxshift-test";
pub const SECRET_KEY: &str = "s3-canary-secret-0f4e2b";
pub const BUCKET: &str = "etcd-backups";

/// The `s3s-fs` binary, or a panic saying how to get it.
pub fn s3s_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("S3S_FS_BIN").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let cached = PathBuf::from("/var/cache/proxshift/s3s-fs-0.14.1/bin/s3s-fs");
    assert!(
        cached.is_file(),
        "s3s-fs not found: these tests need a real S3 server. Run scripts/deps/s3s.sh or set S3S_FS_BIN. \
         Looked in {}",
        cached.display()
    );
    cached
}

/// A running `s3s-fs` over a scratch folder holding one empty bucket; stopped and removed on drop.
pub struct S3Server {
    child: Child,
    pub root: PathBuf,
    pub endpoint: String,
}

impl S3Server {
    pub fn start(tag: &str) -> S3Server {
        let root = std::env::temp_dir().join(format!("proxshift-s3-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(BUCKET)).expect("bucket folder");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut child = Command::new(s3s_bin())
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(&root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("s3s-fs starts");
        // Ready once it accepts a connection; a server that exited, or never listens, fails the test.
        let mut tries = 0;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("s3s-fs exited before it listened on {port}: {status}");
            }
            tries += 1;
            if tries > 400 {
                let _ = child.kill();
                panic!("s3s-fs did not listen on {port} after {tries} tries");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        S3Server {
            child,
            root,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }

    pub fn options(&self) -> StoreOptions {
        StoreOptions {
            endpoint: self.endpoint.clone(),
            bucket: BUCKET.into(),
            region: "us-east-1".into(),
            credentials: Credentials {
                access_key: ACCESS_KEY.into(),
                secret_key: SECRET_KEY.into(),
                session_token: None,
            },
            tls: proxshift_http::Tls::verified(),
            timeout: Duration::from_secs(30),
        }
    }

    /// The file behind an object of the bucket.
    pub fn file(&self, key: &str) -> PathBuf {
        Path::new(&self.root).join(BUCKET).join(key)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
