//! ISO upload through the API (`POST /nodes/{node}/storage/{storage}/upload`, multipart): no SMB/NFS
//! mounts, no SSH. Fields go in PVE's parse order (`content`, `checksum-algorithm`, `checksum`, then
//! the file part named `filename`); the server verifies the checksum in the `imgcopy` task.
//! The file is streamed from disk in 1 MiB frames on reqwest's async client (`proxshift_http::async_client`,
//! same TLS settings as every other request): the blocking client's 8 KiB body pump would cap the upload
//! at a fraction of the link, and nothing else about an upload differs.

use std::io::Read;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use proxshift_http::reqwest::multipart::{Form, Part};
use proxshift_http::reqwest::{Body, Method};
use serde_json::Value;

use crate::client::{envelope, reason_phrase, transport_error, Client};
use crate::error::Error;
use crate::task::TaskOutcome;

/// Frames of the file part: large, so the upload runs at the link's speed (curl sends 64 KiB).
const FRAME: usize = 1 << 20;

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

/// A file as a request body, read a frame at a time as the connection takes them: the module
/// holds one frame, never the file. (A local file read does not block for long, so it is done in
/// `poll_frame` itself, on the upload's own single-threaded runtime.)
struct FileBody {
    file: std::fs::File,
    left: u64,
}

impl HttpBody for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let mut buf = vec![0u8; self.left.min(FRAME as u64) as usize];
        let read = self.file.read(&mut buf).and_then(|n| match n {
            0 => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file got shorter while it was uploaded",
            )),
            n => Ok(n),
        });
        Poll::Ready(Some(read.map(|n| {
            buf.truncate(n);
            self.left -= n as u64;
            Frame::data(Bytes::from(buf))
        })))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
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
            let cannot_read =
                |e: std::io::Error| Error::invalid(format!("cannot read {}: {e}", file.display()));
            let f = std::fs::File::open(file).map_err(cannot_read)?;
            let len = f.metadata().map_err(cannot_read)?.len();
            let part = Part::stream_with_length(Body::wrap(FileBody { file: f, left: len }), len)
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
            let answer = self.send_async(&path, form, timeout)?;
            Ok(answer.get("data").cloned().unwrap_or(Value::Null))
        };
        self.run_task(timeout, send)
    }

    /// POST `form` to `path` on the async client, on a runtime of its own for this one request.
    fn send_async(&self, path: &str, form: Form, timeout: Duration) -> Result<Value, Error> {
        let http = proxshift_http::async_client(self.http_options())
            .map_err(|e| Error::invalid(e.to_string()))?;
        let mut rb = http
            .post(format!("{}/api2/json{path}", self.base_url()))
            .multipart(form)
            .timeout(timeout);
        // Uploads are writes; pve-http-server skips the CSRF check for them, sending it is harmless.
        for (name, value) in self.auth_headers(true)? {
            rb = rb.header(name, value);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::invalid(format!("cannot start the upload's runtime: {e}")))?;
        let (status, reason, body) = rt.block_on(async {
            let resp = rb
                .send()
                .await
                .map_err(|e| transport_error(&Method::POST, path, &e))?;
            let status = resp.status();
            let reason = reason_phrase(status, resp.extensions());
            let body = resp
                .text()
                .await
                .map_err(|e| transport_error(&Method::POST, path, &e))?;
            Ok::<_, Error>((status.as_u16(), reason, body))
        })?;
        envelope("POST", path, (status, &reason), &body)
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
