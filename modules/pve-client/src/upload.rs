//! ISO upload through the API (`POST /nodes/{node}/storage/{storage}/upload`, multipart): no SMB/NFS
//! mounts, no SSH. Fields go in PVE's parse order (`content`, `checksum-algorithm`, `checksum`, then
//! the file part named `filename`); the server verifies the checksum in the `imgcopy` task.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use proxshift_http::reqwest::blocking::multipart::{Form, Part};
use proxshift_http::reqwest::Method;
use serde_json::Value;

use crate::client::{read_response, transport_error, Client};
use crate::error::Error;
use crate::task::TaskOutcome;

/// Hex SHA-256 of a file, streamed.
pub fn sha256_file(path: &Path) -> Result<String, Error> {
    let mut f = std::fs::File::open(path)
        .map_err(|e| Error::invalid(format!("cannot read {}: {e}", path.display())))?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| Error::invalid(format!("cannot read {}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    Ok(ctx
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

impl Client {
    /// Upload `file` as `filename` (must end `.iso` or `.img`) to `storage` on `node` with content type
    /// `iso`, and wait for the copy task. `sha256` lets the server verify what arrived. The request
    /// itself gets `timeout` (large ISOs take minutes), not the per-request API timeout.
    pub fn upload_iso(
        &self,
        node: &str,
        storage: &str,
        file: &Path,
        filename: &str,
        sha256: Option<&str>,
        timeout: Duration,
    ) -> Result<Option<TaskOutcome>, Error> {
        let path = format!("/nodes/{node}/storage/{storage}/upload");
        let send = || -> Result<Value, Error> {
            let part = Part::file(file)
                .map_err(|e| Error::invalid(format!("cannot read {}: {e}", file.display())))?
                .file_name(filename.to_string())
                .mime_str("application/octet-stream")
                .map_err(|e| Error::invalid(e.to_string()))?;
            let mut form = Form::new().text("content", "iso");
            if let Some(sum) = sha256 {
                form = form
                    .text("checksum-algorithm", "sha256")
                    .text("checksum", sum.to_string());
            }
            let form = form.part("filename", part);
            let url = format!("{}/api2/json{path}", self.base_url());
            let rb = self.http().post(&url).multipart(form).timeout(timeout);
            let resp = self
                .authorize_upload(rb)?
                .send()
                .map_err(|e| transport_error(&Method::POST, &path, &e))?;
            Ok(read_response("POST", &path, resp)?
                .get("data")
                .cloned()
                .unwrap_or(Value::Null))
        };
        self.run_task(timeout, send)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_a_known_file() {
        let dir = std::env::temp_dir().join(format!("pve-client-sha-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("abc.iso");
        std::fs::write(&f, b"abc").unwrap();
        assert_eq!(
            sha256_file(&f).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(sha256_file(&dir.join("missing.iso"))
            .unwrap_err()
            .to_string()
            .contains("missing.iso"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
