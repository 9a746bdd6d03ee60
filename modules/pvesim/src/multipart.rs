//! Incremental `multipart/form-data` parsing for storage uploads: the body is fed chunk by chunk
//! as it arrives and never held whole, like pve-http-server's `file_upload_multipart`
//! (`src/PVE/APIServer/AnyEvent.pm`), which keeps only a boundary's length of the read buffer
//! back while it writes a file part out. A delimiter split across chunks is found because the
//! bytes that could start one stay buffered until the next chunk decides.

/// The `boundary` parameter of a multipart content type.
pub fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_string())
            .filter(|b| !b.is_empty())
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// `name="x"` style parameter of a Content-Disposition header.
fn disposition_param(header: &str, key: &str) -> Option<String> {
    header.split(';').skip(1).find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// Why an upload body is not valid multipart (shown as `multipart parse error: …`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MultipartError {
    #[error("multipart body without boundary")]
    NoBoundary,
    #[error("multipart part without header end")]
    NoHeaderEnd,
    #[error("unterminated multipart part")]
    Unterminated,
    #[error("multipart part without Content-Disposition")]
    NoDisposition,
    #[error("multipart boundary not followed by a line end")]
    BadDelimiter,
    #[error("more than one file part")]
    SecondFile,
}

/// A part's headers: its form field name and, for a file, the file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartHead {
    pub name: String,
    pub filename: Option<String>,
}

/// What the parser found next.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A part begins.
    Part(PartHead),
    /// Some of the current part's content (a part's content may come in many pieces).
    Data(&'a [u8]),
    /// The current part is complete.
    PartEnd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the first delimiter (a preamble is skipped).
    Preamble,
    /// Just after a delimiter: `--` closes the body, a line end starts a part's headers.
    AfterDelimiter,
    Headers,
    Body,
    /// After the closing delimiter: the epilogue is ignored.
    Done,
}

/// Headers of one part larger than this are refused (pve-http-server allows about 2 KiB).
const MAX_HEAD: usize = 16 * 1024;

/// The incremental parser: `feed` each chunk, then take `next_event`s until it answers `None`;
/// `finish` at the end of the body says whether the body was complete.
#[derive(Debug)]
pub struct Parser {
    /// `\r\n--BOUNDARY`: the line end before a delimiter belongs to the delimiter.
    delim: Vec<u8>,
    buf: Vec<u8>,
    /// `buf[..pos]` is consumed (dropped at the next `feed`).
    pos: usize,
    state: State,
}

impl Parser {
    pub fn new(boundary: &str) -> Parser {
        let delim = format!("\r\n--{boundary}").into_bytes();
        // A body may start with the delimiter itself, without a line end in front: the line end
        // supplied here lets the first delimiter match like every other one.
        Parser {
            delim,
            buf: b"\r\n".to_vec(),
            pos: 0,
            state: State::Preamble,
        }
    }

    /// Adds the next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        if self.state != State::Done {
            self.buf.extend_from_slice(chunk);
        }
    }

    /// The body ended: was it complete?
    pub fn finish(&self) -> Result<(), MultipartError> {
        match self.state {
            State::Done => Ok(()),
            State::Preamble => Err(MultipartError::NoBoundary),
            State::Headers => Err(MultipartError::NoHeaderEnd),
            State::AfterDelimiter | State::Body => Err(MultipartError::Unterminated),
        }
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The next event from what was fed so far; `None` when more input is needed (or the
    /// closing delimiter was seen).
    pub fn next_event(&mut self) -> Result<Option<Event<'_>>, MultipartError> {
        loop {
            let rest = &self.buf[self.pos..];
            // Bytes that could be the start of a delimiter must wait for the next chunk.
            let keep = self.delim.len() - 1;
            match self.state {
                State::Done => return Ok(None),
                State::Preamble => match find(rest, &self.delim) {
                    Some(i) => {
                        self.pos += i + self.delim.len();
                        self.state = State::AfterDelimiter;
                    }
                    None => {
                        self.pos += rest.len().saturating_sub(keep);
                        return Ok(None);
                    }
                },
                State::AfterDelimiter => match rest {
                    [b'-', b'-', ..] => {
                        self.state = State::Done;
                        self.pos = self.buf.len();
                    }
                    // Transport padding (RFC 2046) before the line end.
                    [b' ' | b'\t', ..] => self.pos += 1,
                    [b'\r', b'\n', ..] => {
                        self.pos += 2;
                        self.state = State::Headers;
                    }
                    [b'\n', ..] => {
                        self.pos += 1;
                        self.state = State::Headers;
                    }
                    [] | [b'-'] | [b'\r'] => return Ok(None),
                    _ => return Err(MultipartError::BadDelimiter),
                },
                State::Headers => {
                    if rest.starts_with(b"\r\n") {
                        // A part without any header.
                        return Err(MultipartError::NoDisposition);
                    }
                    let Some(end) = find(rest, b"\r\n\r\n") else {
                        if rest.len() > MAX_HEAD {
                            return Err(MultipartError::NoHeaderEnd);
                        }
                        return Ok(None);
                    };
                    let head = part_head(&String::from_utf8_lossy(&rest[..end]))?;
                    self.pos += end + 4;
                    self.state = State::Body;
                    return Ok(Some(Event::Part(head)));
                }
                State::Body => {
                    let start = self.pos;
                    return Ok(match find(rest, &self.delim) {
                        Some(0) => {
                            self.pos += self.delim.len();
                            self.state = State::AfterDelimiter;
                            Some(Event::PartEnd)
                        }
                        Some(i) => {
                            self.pos += i;
                            Some(Event::Data(&self.buf[start..start + i]))
                        }
                        None if rest.len() > keep => {
                            let n = rest.len() - keep;
                            self.pos += n;
                            Some(Event::Data(&self.buf[start..start + n]))
                        }
                        None => None,
                    });
                }
            }
        }
    }
}

/// A part's field name and file name from its headers.
fn part_head(head: &str) -> Result<PartHead, MultipartError> {
    let disposition = head
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("content-disposition:"))
        .ok_or(MultipartError::NoDisposition)?;
    Ok(PartHead {
        name: disposition_param(disposition, "name").unwrap_or_default(),
        filename: disposition_param(disposition, "filename"),
    })
}

/// One form part, whole (for bodies already in memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub name: String,
    pub filename: Option<String>,
    pub data: Vec<u8>,
}

/// Parses a body already in memory, fed in chunks of `chunk` bytes (the whole body at once for
/// `usize::MAX`).
pub fn parse_chunked(
    body: &[u8],
    boundary: &str,
    chunk: usize,
) -> Result<Vec<Part>, MultipartError> {
    let mut p = Parser::new(boundary);
    let mut parts: Vec<Part> = Vec::new();
    for piece in body.chunks(chunk.max(1)) {
        p.feed(piece);
        while let Some(ev) = p.next_event()? {
            match ev {
                Event::Part(h) => parts.push(Part {
                    name: h.name,
                    filename: h.filename,
                    data: Vec::new(),
                }),
                Event::Data(d) => {
                    if let Some(last) = parts.last_mut() {
                        last.data.extend_from_slice(d);
                    }
                }
                Event::PartEnd => {}
            }
        }
    }
    p.finish()?;
    Ok(parts)
}

/// Parses a body already in memory.
pub fn parse(body: &[u8], boundary: &str) -> Result<Vec<Part>, MultipartError> {
    parse_chunked(body, boundary, usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::{boundary, parse, parse_chunked, MultipartError, Part};

    const BODY: &[u8] = b"preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\niso\r\n--XyZ\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"a.iso\"\r\nContent-Type: application/octet-stream\r\n\r\nAB\r\nCD\r\n--XyQ\r\n--X\r\n\r\n--XyZ--\r\nepilogue";

    fn part(name: &str, filename: Option<&str>, data: &[u8]) -> Part {
        Part {
            name: name.into(),
            filename: filename.map(Into::into),
            data: data.to_vec(),
        }
    }

    #[test]
    fn parses_fields_and_file() {
        assert_eq!(
            boundary("multipart/form-data; boundary=\"XyZ\"").as_deref(),
            Some("XyZ")
        );
        // The file holds line ends and near-delimiters (`--XyQ`, `--X`): all of it is data.
        let want = vec![
            part("content", None, b"iso"),
            part("filename", Some("a.iso"), b"AB\r\nCD\r\n--XyQ\r\n--X\r\n"),
        ];
        assert_eq!(parse(BODY, "XyZ").unwrap(), want);
    }

    #[test]
    fn every_chunk_size_gives_the_same_parts() {
        // Every split point of every delimiter, header end and line end is crossed by some size.
        let whole = parse(BODY, "XyZ").unwrap();
        for size in 1..=BODY.len() {
            assert_eq!(
                parse_chunked(BODY, "XyZ", size).unwrap(),
                whole,
                "size {size}"
            );
        }
    }

    #[test]
    fn body_starting_with_the_delimiter_and_an_empty_file() {
        let body = b"--b\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"e.iso\"\r\n\r\n\r\n--b--";
        for size in 1..=body.len() {
            assert_eq!(
                parse_chunked(body, "b", size).unwrap(),
                vec![part("filename", Some("e.iso"), b"")],
                "size {size}"
            );
        }
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(
            parse(b"nothing here", "XyZ"),
            Err(MultipartError::NoBoundary)
        );
        let cut = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nno end";
        for size in 1..=cut.len() {
            assert_eq!(
                parse_chunked(cut, "XyZ", size),
                Err(MultipartError::Unterminated)
            );
        }
        assert_eq!(
            parse(
                b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"",
                "XyZ"
            ),
            Err(MultipartError::NoHeaderEnd)
        );
        assert_eq!(
            parse(b"--XyZ\r\nX-Other: 1\r\n\r\nv\r\n--XyZ--", "XyZ"),
            Err(MultipartError::NoDisposition)
        );
        assert_eq!(
            parse(b"--XyZ\r\n\r\nv\r\n--XyZ--", "XyZ"),
            Err(MultipartError::NoDisposition)
        );
        assert_eq!(
            parse(
                b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZabc",
                "XyZ"
            ),
            Err(MultipartError::BadDelimiter)
        );
        assert_eq!(boundary("multipart/form-data"), None);
    }

    #[test]
    fn oversized_headers_are_refused_before_the_end() {
        let mut body = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\nX-Pad: ".to_vec();
        body.extend(vec![b'p'; 20 * 1024]);
        assert_eq!(
            parse_chunked(&body, "XyZ", 4096),
            Err(MultipartError::NoHeaderEnd)
        );
    }
}
