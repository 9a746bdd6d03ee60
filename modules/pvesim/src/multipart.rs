//! Minimal `multipart/form-data` parsing for storage uploads (the body is already in memory).

/// One form part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub name: String,
    pub filename: Option<String>,
    pub data: Vec<u8>,
}

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

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    (from..=hay.len() - needle.len())
        .find(|&i| hay[i] == needle[0] && &hay[i..i + needle.len()] == needle)
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
}

pub fn parse(body: &[u8], boundary: &str) -> Result<Vec<Part>, MultipartError> {
    let delim = format!("--{boundary}");
    let delim = delim.as_bytes();
    let mut pos = find(body, delim, 0).ok_or(MultipartError::NoBoundary)? + delim.len();
    let mut parts = Vec::new();
    loop {
        if body[pos..].starts_with(b"--") {
            return Ok(parts);
        }
        if body[pos..].starts_with(b"\r\n") {
            pos += 2;
        }
        let head_end = find(body, b"\r\n\r\n", pos).ok_or(MultipartError::NoHeaderEnd)?;
        let head = String::from_utf8_lossy(&body[pos..head_end]).to_string();
        let data_start = head_end + 4;
        let mut closing = b"\r\n".to_vec();
        closing.extend_from_slice(delim);
        let data_end = find(body, &closing, data_start).ok_or(MultipartError::Unterminated)?;
        let disposition = head
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("content-disposition:"))
            .ok_or(MultipartError::NoDisposition)?;
        parts.push(Part {
            name: disposition_param(disposition, "name").unwrap_or_default(),
            filename: disposition_param(disposition, "filename"),
            data: body[data_start..data_end].to_vec(),
        });
        pos = data_end + closing.len();
    }
}

#[cfg(test)]
mod tests {
    use super::{boundary, parse};

    #[test]
    fn parses_fields_and_file() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\niso\r\n--XyZ\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"a.iso\"\r\nContent-Type: application/octet-stream\r\n\r\nAB\r\nCD\r\n--XyZ--\r\n";
        assert_eq!(
            boundary("multipart/form-data; boundary=\"XyZ\"").as_deref(),
            Some("XyZ")
        );
        let parts = parse(body, "XyZ").unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].name.as_str(), parts[0].data.as_slice()),
            ("content", &b"iso"[..])
        );
        assert_eq!(parts[1].filename.as_deref(), Some("a.iso"));
        assert_eq!(parts[1].data, b"AB\r\nCD");
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse(b"nothing here", "XyZ").is_err());
        assert!(parse(
            b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nno end",
            "XyZ"
        )
        .is_err());
        assert_eq!(boundary("multipart/form-data"), None);
    }
}
