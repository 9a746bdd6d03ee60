//! The upload spool: where a multipart file part is written while it arrives.
//!
//! Upstream, pve-http-server writes the file part to `/var/tmp/pveupload-<md5 hex>`
//! (`src/PVE/APIServer/AnyEvent.pm`: `get_upload_filename`; the file is created `O_EXCL`, mode
//! 0600, in `unshift_read_header` and filled by `file_upload_multipart`), and pve-storage's
//! `upload` (`src/PVE/API2/Storage/Status.pm`) hands that path to its `imgcopy` worker, which
//! unlinks it when it ends, whether it failed or not. The simulator's spool is a directory of its
//! own (under the system temp dir or `Config::upload_dir`), made at the first upload and removed
//! with the simulator. A spooled file is removed when its worker ends, or — when the request
//! fails before a worker starts — when its last handle goes.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::ops::upload::{Checksum, Hasher};

/// Chunks in flight between the connection and the writer thread (each at most one body frame).
const IN_FLIGHT: usize = 16;
/// Write buffer of a spooled file.
const WRITE_BUF: usize = 256 * 1024;

fn random_hex() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// The simulator's upload directory.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    made: Mutex<bool>,
}

impl Spool {
    /// A spool under `parent` (not made until the first upload).
    pub fn new(parent: &Path) -> Spool {
        let name = format!(
            "pvesim-uploads-{}-{}",
            std::process::id(),
            &random_hex()[..12]
        );
        Spool {
            dir: parent.join(name),
            made: Mutex::new(false),
        }
    }

    /// Where spooled files go.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new, empty spool file (`pveupload-<hex>`, only the simulator's user may read it).
    pub fn create(&self) -> io::Result<(Arc<SpoolFile>, File)> {
        {
            let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
            if !*made {
                private_dir(&self.dir)?;
                *made = true;
            }
        }
        let path = self.dir.join(format!("pveupload-{}", random_hex()));
        let file = private_file(&path)?;
        Ok((Arc::new(SpoolFile { path }), file))
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        if *self.made.get_mut().unwrap_or_else(|e| e.into_inner()) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(unix)]
fn private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn private_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir(dir)
}

#[cfg(unix)]
fn private_file(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

/// One spooled file part; removed by `remove` or when the last handle goes.
#[derive(Debug)]
pub struct SpoolFile {
    path: PathBuf,
}

impl SpoolFile {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Deletes the file (again: nothing).
    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for SpoolFile {
    fn drop(&mut self) {
        self.remove();
    }
}

/// What a spool writer wrote.
#[derive(Debug)]
pub struct Written {
    pub size: u64,
    /// Present when the writer was given a hasher.
    pub checksum: Option<Checksum>,
}

/// Writes a file part on a blocking thread while the body arrives, hashing it on the way, so the
/// connection's task never waits on the disk and no more than a few chunks are held in memory.
pub struct SpoolWriter {
    tx: mpsc::Sender<Bytes>,
    done: Option<JoinHandle<io::Result<Written>>>,
}

impl SpoolWriter {
    pub fn start(file: File, mut hasher: Option<Hasher>) -> SpoolWriter {
        let (tx, mut rx) = mpsc::channel::<Bytes>(IN_FLIGHT);
        let done = tokio::task::spawn_blocking(move || {
            let mut out = BufWriter::with_capacity(WRITE_BUF, file);
            let mut size = 0u64;
            while let Some(chunk) = rx.blocking_recv() {
                out.write_all(&chunk)?;
                if let Some(h) = hasher.as_mut() {
                    h.update(&chunk);
                }
                size += chunk.len() as u64;
            }
            out.flush()?;
            Ok(Written {
                size,
                checksum: hasher.map(Hasher::finish),
            })
        });
        SpoolWriter {
            tx,
            done: Some(done),
        }
    }

    /// Queues `data` for writing; fails with the writer's error when it stopped.
    pub async fn write(&mut self, data: &[u8]) -> io::Result<()> {
        if self.tx.send(Bytes::copy_from_slice(data)).await.is_ok() {
            return Ok(());
        }
        Err(match self.done.take() {
            Some(done) => match done.await {
                Ok(Err(e)) => e,
                _ => io::Error::other("the upload writer stopped"),
            },
            None => io::Error::other("the upload writer stopped"),
        })
    }

    /// Waits until everything is on disk.
    pub async fn finish(self) -> io::Result<Written> {
        let SpoolWriter { tx, done } = self;
        drop(tx);
        match done {
            Some(done) => done
                .await
                .map_err(|e| io::Error::other(format!("the upload writer failed: {e}")))?,
            None => Err(io::Error::other("the upload writer stopped")),
        }
    }
}

/// The checksum of a spooled file, read back (for an algorithm named after the file part).
pub async fn hash_file(file: Arc<SpoolFile>, mut hasher: Hasher) -> io::Result<Checksum> {
    tokio::task::spawn_blocking(move || {
        let mut f = File::open(file.path())?;
        let mut buf = vec![0u8; WRITE_BUF];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                return Ok(hasher.finish());
            }
            hasher.update(&buf[..n]);
        }
    })
    .await
    .map_err(|e| io::Error::other(format!("checksum failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::Spool;

    #[test]
    fn files_go_when_their_last_handle_goes_and_the_dir_with_the_spool() {
        let parent = std::env::temp_dir();
        let spool = Spool::new(&parent);
        let dir = spool.dir().to_path_buf();
        assert!(!dir.exists(), "made at the first upload only");
        let (a, _) = spool.create().unwrap();
        let (b, _) = spool.create().unwrap();
        assert_ne!(a.path(), b.path());
        assert!(a.path().starts_with(&dir) && a.path().exists());
        let a_path = a.path().to_path_buf();
        let kept = a.clone();
        drop(a);
        assert!(a_path.exists(), "a second handle keeps it");
        kept.remove();
        assert!(!a_path.exists());
        drop(kept);
        drop(spool);
        assert!(!dir.exists());
        drop(b);
    }
}
