//! `POST /nodes/{node}/storage/{storage}/upload` — pve-storage's `upload`
//! (`src/PVE/API2/Storage/Status.pm`): content, storage type, extension and checksum checks,
//! then the `imgcopy` worker stores the file. The file part arrives spooled on disk
//! (`crate::receive`, as pve-http-server hands the API a `tmpfilename`); the worker removes it.

use std::sync::Arc;

use crate::auth::Principal;
use crate::error::{ErrorReply, ReplyResult};
use crate::model::Volume;
use crate::receive::Upload;
use crate::sim::{Sim, Spawn};
use crate::spool::SpoolFile;
use crate::tasks::{base_duration, Action, TaskResult};

/// An upload as parsed by the handler (the file part is present).
pub struct UploadFile {
    pub node: String,
    pub storage: String,
    pub content: String,
    pub file: Upload,
    pub checksum: Option<String>,
    pub checksum_algorithm: Option<String>,
}

/// The file the `imgcopy` worker stores.
#[derive(Debug, Clone)]
pub struct NewFile {
    pub node: String,
    pub storage: String,
    /// Volume name, `CONTENT/FILENAME`.
    pub name: String,
    pub size: u64,
    pub content: String,
    /// The task fails with this (a checksum mismatch is reported by the worker).
    pub checksum_error: Option<String>,
    /// The spooled upload, removed when the worker ends.
    pub spooled: Arc<SpoolFile>,
}

/// Checks the upload and starts the `imgcopy` worker; returns its UPID.
pub fn start(sim: &mut Sim, who: &Principal, req: UploadFile) -> ReplyResult<String> {
    let UploadFile {
        node,
        storage: sid,
        content,
        file,
        ..
    } = &req;
    let st = sim
        .storage(node, sid)
        .ok_or_else(|| ErrorReply::die(format!("storage '{sid}' does not exist")))?;
    if !matches!(content.as_str(), "iso" | "vztmpl" | "import") {
        return Err(ErrorReply::param(
            "content",
            format!("upload content type '{content}' not allowed"),
        ));
    }
    if !st.is_file_based() {
        return Err(ErrorReply::die(format!(
            "can't upload to storage type '{}', not a file based storage!",
            st.kind
        )));
    }
    if !st.content.contains(content) {
        return Err(ErrorReply::die(format!(
            "storage '{sid}' does not support '{content}' content"
        )));
    }
    let fname = file
        .filename
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string();
    if !extension_ok(content, &fname) {
        return Err(ErrorReply::param("filename", "wrong file extension"));
    }
    let checksum_error = checksum_error(&req)?;
    let size = file.size;
    // Larger files take longer (≈100 MiB/s before scaling).
    let secs = base_duration("imgcopy") + size as f64 / (100.0 * 1048576.0);
    let new = NewFile {
        node: node.clone(),
        storage: sid.clone(),
        name: format!("{content}/{fname}"),
        size,
        content: content.clone(),
        checksum_error,
        spooled: file.file.clone(),
    };
    Ok(sim.spawn(
        who,
        Spawn {
            node: node.clone(),
            kind: "imgcopy".to_string(),
            id: "".to_string(),
            action: Action::Upload(new),
            base_secs: secs,
            flock: None,
            fail: None,
        },
    ))
}

fn extension_ok(content: &str, fname: &str) -> bool {
    let ends = |exts: &[&str]| exts.iter().any(|e| fname.ends_with(e));
    match content {
        "iso" => ends(&[".iso", ".img"]),
        "vztmpl" => ends(&[".tar.gz", ".tar.xz", ".tar.zst"]),
        _ => ends(&[".ova", ".qcow2", ".raw", ".vmdk", ".img"]),
    }
}

/// The worker's error when the given checksum does not match the data (pve-storage's
/// `upload` worker: "checksum mismatch: got '…' != expect '…'", compared case-insensitively).
fn checksum_error(req: &UploadFile) -> ReplyResult<Option<String>> {
    match (&req.checksum, &req.checksum_algorithm) {
        (Some(want), Some(alg)) => {
            let got = match &req.file.checksum {
                Some(c) if &c.algorithm == alg => c.hex.clone(),
                // md5 is not computed by the simulator: accept it as given.
                _ => want.to_lowercase(),
            };
            Ok((got != want.to_lowercase())
                .then(|| format!("checksum mismatch: got '{got}' != expect '{want}'")))
        }
        (Some(_), None) => Err(ErrorReply::param(
            "checksum-algorithm",
            "parameter is required with 'checksum'",
        )),
        _ => Ok(None),
    }
}

/// A checksum of uploaded content, lower-case hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checksum {
    pub algorithm: String,
    pub hex: String,
}

/// A running digest in one of `checksum-algorithm`'s algorithms, fed as the upload streams in.
/// ring's assembly (SHA extensions where the CPU has them) for all but SHA-224, which ring lacks.
pub struct Hasher {
    algorithm: String,
    digest: Digest,
}

enum Digest {
    Ring(ring::digest::Context),
    Sha224(sha2::Sha224),
}

impl Hasher {
    /// The digest for `algorithm`; `None` for md5, which the simulator does not compute, and for
    /// names PVE does not know (the parameter check refuses those).
    pub fn new(algorithm: &str) -> Option<Hasher> {
        use ring::digest::{Context, SHA1_FOR_LEGACY_USE_ONLY, SHA256, SHA384, SHA512};
        let digest = match algorithm {
            "sha1" => Digest::Ring(Context::new(&SHA1_FOR_LEGACY_USE_ONLY)),
            "sha224" => Digest::Sha224(sha2::Sha224::default()),
            "sha256" => Digest::Ring(Context::new(&SHA256)),
            "sha384" => Digest::Ring(Context::new(&SHA384)),
            "sha512" => Digest::Ring(Context::new(&SHA512)),
            _ => return None,
        };
        Some(Hasher {
            algorithm: algorithm.to_string(),
            digest,
        })
    }

    pub fn update(&mut self, data: &[u8]) {
        match &mut self.digest {
            Digest::Ring(c) => c.update(data),
            Digest::Sha224(d) => sha2::Digest::update(d, data),
        }
    }

    pub fn finish(self) -> Checksum {
        let hex = match self.digest {
            Digest::Ring(c) => hex(c.finish().as_ref()),
            Digest::Sha224(d) => hex(&sha2::Digest::finalize(d)),
        };
        Checksum {
            algorithm: self.algorithm,
            hex,
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The `imgcopy` worker: stores the file if the storage has room.
pub fn finish(sim: &mut Sim, f: NewFile, log: &mut Vec<String>) -> TaskResult {
    // The simulator keeps sizes, not contents: the spooled file's work is done either way.
    log.push(format!(
        "starting file import from: {}",
        f.spooled.path().display()
    ));
    f.spooled.remove();
    if let Some(e) = f.checksum_error {
        return Err(e.into());
    }
    let now = sim.unix_now();
    let st = sim
        .storage_mut(&f.node, &f.storage)
        .ok_or("storage vanished")?;
    let existing = st.volumes.get(&f.name).map(|v| v.size).unwrap_or(0);
    if f.size > st.avail() + existing {
        return Err(format!(
            "error during upload: write to '{}': No space left on device",
            f.name
        )
        .into());
    }
    let format = if f.content == "iso" {
        "iso".into()
    } else {
        f.name.rsplit('.').next().unwrap_or("raw").into()
    };
    st.volumes.insert(
        f.name.clone(),
        Volume {
            name: f.name.clone(),
            size: f.size,
            format,
            content: f.content,
            vmid: None,
            ctime: now,
            parent: None,
        },
    );
    log.push(format!("target file: {}", f.name));
    log.push(format!("file size is: {}", f.size));
    Ok(0)
}
