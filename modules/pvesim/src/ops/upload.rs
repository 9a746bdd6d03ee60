//! `POST /nodes/{node}/storage/{storage}/upload` — pve-manager's storage `upload`: content,
//! storage type, extension and checksum checks, then the `imgcopy` worker stores the file.

use sha2::Digest;

use crate::auth::Principal;
use crate::error::{ErrorReply, ReplyResult};
use crate::model::Volume;
use crate::server::Upload;
use crate::sim::{Sim, Spawn};
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
    let size = file.data.len() as u64;
    // Larger files take longer (≈100 MiB/s before scaling).
    let secs = base_duration("imgcopy") + size as f64 / (100.0 * 1048576.0);
    let new = NewFile {
        node: node.clone(),
        storage: sid.clone(),
        name: format!("{content}/{fname}"),
        size,
        content: content.clone(),
        checksum_error,
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

/// The worker's error when the given checksum does not match the data.
fn checksum_error(req: &UploadFile) -> ReplyResult<Option<String>> {
    let data = &req.file.data;
    match (&req.checksum, &req.checksum_algorithm) {
        (Some(want), Some(alg)) => {
            let got = match alg.as_str() {
                "sha1" => hex(&sha1::Sha1::digest(data)),
                "sha224" => hex(&sha2::Sha224::digest(data)),
                "sha256" => hex(&sha2::Sha256::digest(data)),
                "sha384" => hex(&sha2::Sha384::digest(data)),
                "sha512" => hex(&sha2::Sha512::digest(data)),
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

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The `imgcopy` worker: stores the file if the storage has room.
pub fn finish(sim: &mut Sim, f: NewFile, log: &mut Vec<String>) -> TaskResult {
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
