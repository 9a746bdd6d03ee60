//! Receiving a `multipart/form-data` upload as pve-http-server does (`src/PVE/APIServer/AnyEvent.pm`,
//! `file_upload_multipart`): the body's frames go through `multipart::Parser` as they arrive, form
//! fields are kept, and the file part — which must be named `filename` — streams to a spool file
//! while its checksum is computed on the way. Nothing of the file is held in memory beyond the
//! chunks in flight to the writer.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;

use crate::error::{ErrorReply, ReplyResult};
use crate::multipart::{Event, MultipartError, Parser};
use crate::ops::upload::{Checksum, Hasher};
use crate::spool::{hash_file, Spool, SpoolFile, SpoolWriter};

/// A file part of a multipart upload, spooled on disk.
#[derive(Debug, Clone)]
pub struct Upload {
    pub filename: String,
    /// Removed when the `imgcopy` worker ends, or when the last handle goes.
    pub file: Arc<SpoolFile>,
    pub size: u64,
    /// In the algorithm `checksum-algorithm` named, when the simulator computes that one.
    pub checksum: Option<Checksum>,
}

/// A received multipart body: its fields (the file part's as `filename`) and the file.
#[derive(Debug, Default)]
pub struct Received {
    pub fields: BTreeMap<String, Value>,
    pub upload: Option<Upload>,
}

/// The part being read.
enum Current {
    None,
    Field(String, Vec<u8>),
    File,
}

struct Form<'a> {
    spool: &'a Spool,
    fields: BTreeMap<String, Value>,
    field_bytes: usize,
    current: Current,
    file: Option<(String, Arc<SpoolFile>, SpoolWriter)>,
}

fn parse_error(e: MultipartError) -> ErrorReply {
    ErrorReply::new(400, format!("multipart parse error: {e}"))
}

/// pve-http-server's answer when writing the temporary file fails.
fn write_error(e: std::io::Error) -> ErrorReply {
    ErrorReply::new(501, format!("write to temporary file failed - {e}"))
}

impl Form<'_> {
    async fn event(&mut self, ev: Event<'_>) -> ReplyResult<()> {
        match ev {
            Event::Part(head) => match head.filename {
                Some(fname) => self.start_file(&head.name, fname),
                None => {
                    self.current = Current::Field(head.name, Vec::new());
                    Ok(())
                }
            },
            Event::Data(d) => match &mut self.current {
                Current::File => match &mut self.file {
                    Some((_, _, w)) => w.write(d).await.map_err(write_error),
                    None => Ok(()),
                },
                Current::Field(_, value) => {
                    self.field_bytes += d.len();
                    if self.field_bytes > crate::server::MAX_BODY {
                        return Err(ErrorReply::new(413, "request entity too large"));
                    }
                    value.extend_from_slice(d);
                    Ok(())
                }
                Current::None => Ok(()),
            },
            Event::PartEnd => {
                if let Current::Field(name, value) =
                    std::mem::replace(&mut self.current, Current::None)
                {
                    let value = String::from_utf8_lossy(&value).into_owned();
                    self.fields.insert(name, Value::String(value));
                }
                Ok(())
            }
        }
    }

    /// PVE requires the file part to be named `filename`; its file name becomes the parameter.
    fn start_file(&mut self, name: &str, fname: String) -> ReplyResult<()> {
        if name != "filename" {
            return Err(ErrorReply::new(
                400,
                format!("wrong field name '{name}' for file upload, expected 'filename'"),
            ));
        }
        if self.file.is_some() {
            return Err(parse_error(MultipartError::SecondFile));
        }
        let (spooled, f) = self.spool.create().map_err(|e| {
            ErrorReply::new(501, format!("unable to create temporary upload file - {e}"))
        })?;
        // The checksum is computed on the way when its algorithm came before the file part.
        let hasher = self.algorithm().and_then(|a| Hasher::new(&a));
        self.fields
            .insert("filename".into(), Value::String(fname.clone()));
        self.file = Some((fname, spooled, SpoolWriter::start(f, hasher)));
        self.current = Current::File;
        Ok(())
    }

    fn algorithm(&self) -> Option<String> {
        self.fields
            .get("checksum-algorithm")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    async fn finish(self) -> ReplyResult<Received> {
        let algorithm = self.algorithm();
        let Some((filename, file, writer)) = self.file else {
            return Ok(Received {
                fields: self.fields,
                upload: None,
            });
        };
        let written = writer.finish().await.map_err(write_error)?;
        let checksum = match (written.checksum, algorithm.and_then(|a| Hasher::new(&a))) {
            (Some(c), _) => Some(c),
            // The algorithm came after the file part: read the file back.
            (None, Some(h)) => Some(hash_file(file.clone(), h).await.map_err(write_error)?),
            (None, None) => None,
        };
        Ok(Received {
            fields: self.fields,
            upload: Some(Upload {
                filename,
                file,
                size: written.size,
                checksum,
            }),
        })
    }
}

/// Reads a multipart body (content type `ctype`) frame by frame; a file part goes to `spool`.
/// On any error the spooled file is removed before this returns.
pub async fn receive<B>(mut body: B, ctype: &str, spool: &Spool) -> ReplyResult<Received>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let boundary = crate::multipart::boundary(ctype)
        .ok_or_else(|| ErrorReply::new(400, "unable to parse multipart boundary"))?;
    let mut parser = Parser::new(&boundary);
    let mut form = Form {
        spool,
        fields: BTreeMap::new(),
        field_bytes: 0,
        current: Current::None,
        file: None,
    };
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ErrorReply::new(400, format!("upload failed - {e}")))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        parser.feed(&data);
        while let Some(ev) = parser.next_event().map_err(parse_error)? {
            form.event(ev).await?;
        }
    }
    parser.finish().map_err(parse_error)?;
    form.finish().await
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use hyper::body::Frame;
    use sha2::Digest;

    use super::*;

    /// A body that arrives in frames of `size` bytes.
    struct Chunks(VecDeque<Bytes>);

    impl Chunks {
        fn new(data: &[u8], size: usize) -> Chunks {
            Chunks(data.chunks(size).map(Bytes::copy_from_slice).collect())
        }
    }

    impl hyper::body::Body for Chunks {
        type Data = Bytes;
        type Error = Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    fn form(before: &[(&str, &str)], file: &[u8], after: &[(&str, &str)]) -> Vec<u8> {
        let field = |k: &str, v: &str| {
            format!("--B\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n")
                .into_bytes()
        };
        let mut b: Vec<u8> = before.iter().flat_map(|(k, v)| field(k, v)).collect();
        b.extend(
            b"--B\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"x.iso\"\r\n\r\n",
        );
        b.extend(file);
        b.extend(b"\r\n");
        b.extend(after.iter().flat_map(|(k, v)| field(k, v)));
        b.extend(b"--B--\r\n");
        b
    }

    const CT: &str = "multipart/form-data; boundary=B";

    fn spool_files(spool: &Spool) -> usize {
        std::fs::read_dir(spool.dir())
            .map(|d| d.count())
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn the_file_part_is_spooled_and_hashed_on_the_way() {
        let spool = Spool::new(&std::env::temp_dir());
        // Content holding near-delimiters (`\r\n--C`, `\r\n-x`) that cross frame edges.
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| b"\r\n--C\r\n-x"[(i % 9) as usize])
            .collect();
        let want: String = sha2::Sha256::digest(&data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        for size in [1, 3, 64, 1000, 16384] {
            let body = form(
                &[("checksum-algorithm", "sha256")],
                &data,
                &[("content", "iso")],
            );
            let r = receive(Chunks::new(&body, size), CT, &spool).await.unwrap();
            let up = r.upload.unwrap();
            assert_eq!(up.size, data.len() as u64, "size {size}");
            assert_eq!(std::fs::read(up.file.path()).unwrap(), data, "size {size}");
            assert_eq!(up.checksum.unwrap().hex, want);
            assert_eq!(r.fields["content"], "iso");
            assert_eq!(r.fields["filename"], "x.iso");
        }
        assert_eq!(
            spool_files(&spool),
            0,
            "each file went with its last handle"
        );
    }

    #[tokio::test]
    async fn an_algorithm_after_the_file_is_computed_from_the_spooled_file() {
        let spool = Spool::new(&std::env::temp_dir());
        let body = form(&[], b"abc", &[("checksum-algorithm", "sha1")]);
        let up = receive(Chunks::new(&body, 5), CT, &spool)
            .await
            .unwrap()
            .upload
            .unwrap();
        assert_eq!(
            up.checksum.unwrap().hex,
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        // md5 is taken as given (not computed).
        let body = form(&[("checksum-algorithm", "md5")], b"abc", &[]);
        let up = receive(Chunks::new(&body, 5), CT, &spool)
            .await
            .unwrap()
            .upload
            .unwrap();
        assert_eq!(up.checksum, None);
    }

    #[tokio::test]
    async fn a_broken_body_leaves_no_spooled_file() {
        let spool = Spool::new(&std::env::temp_dir());
        let mut body = form(&[], &[7u8; 5000], &[]);
        body.truncate(body.len() - 10);
        let e = receive(Chunks::new(&body, 100), CT, &spool)
            .await
            .unwrap_err();
        assert_eq!(
            e.message,
            "multipart parse error: unterminated multipart part"
        );
        assert_eq!(spool_files(&spool), 0);
        let body = String::from_utf8(form(&[], b"x", &[]))
            .unwrap()
            .replace("name=\"filename\"", "name=\"file\"");
        let e = receive(Chunks::new(body.as_bytes(), 7), CT, &spool)
            .await
            .unwrap_err();
        assert_eq!(
            e.message,
            "wrong field name 'file' for file upload, expected 'filename'"
        );
        let e = receive(Chunks::new(b"", 1), "multipart/form-data", &spool)
            .await
            .unwrap_err();
        assert_eq!(e.message, "unable to parse multipart boundary");
        assert_eq!(spool_files(&spool), 0);
    }
}
