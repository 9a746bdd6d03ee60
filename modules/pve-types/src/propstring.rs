//! Property strings (`virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10`) and sizes (`120G`).
//!
//! A property string is a comma-separated `key=value` list whose first item may omit its key (the
//! schema's `default_key`, e.g. `file` for disks, `model` for NICs, `cputype` for `cpu`).

use std::fmt;

use crate::error::{MacError, PropStringError, SizeError};

/// An ordered property string. Keys are unique; later duplicates are an error (as in PVE).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PropString {
    entries: Vec<(String, String)>,
}

impl PropString {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parse `s`; an item without `=` is the value of `default_key` (only allowed once).
    pub fn parse(s: &str, default_key: Option<&str>) -> Result<Self, PropStringError> {
        let mut out = PropString::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None => match default_key {
                    Some(dk) => (dk, item),
                    None => {
                        return Err(PropStringError::NoKey {
                            item: item.to_string(),
                            input: s.to_string(),
                        })
                    }
                },
            };
            if k.is_empty() {
                return Err(PropStringError::EmptyKey {
                    input: s.to_string(),
                });
            }
            if out.get(k).is_some() {
                return Err(PropStringError::DuplicateKey {
                    key: k.to_string(),
                    input: s.to_string(),
                });
            }
            out.entries.push((k.to_string(), v.to_string()));
        }
        Ok(out)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Set (replacing in place, or appending).
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = value,
            None => self.entries.push((key.to_string(), value)),
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(i).1)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Render with `lead` (if present) first and without its key, the rest in order.
    pub fn render(&self, lead: Option<&str>) -> String {
        let mut parts = Vec::new();
        if let Some(l) = lead {
            if let Some(v) = self.get(l) {
                parts.push(v.to_string());
            }
        }
        for (k, v) in &self.entries {
            if Some(k.as_str()) != lead {
                parts.push(format!("{k}={v}"));
            }
        }
        parts.join(",")
    }

    /// Entries sorted by key: the form used to compare two strings regardless of order.
    pub fn sorted(&self) -> Vec<(String, String)> {
        let mut v = self.entries.clone();
        v.sort();
        v
    }
}

impl fmt::Display for PropString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(None))
    }
}

/// A PVE boolean in a property string or config (`1`, `0`, also `on`/`yes`/`true`).
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => Some(true),
        "0" | "off" | "no" | "false" => Some(false),
        _ => None,
    }
}

pub fn bool01(b: bool) -> &'static str {
    if b {
        "1"
    } else {
        "0"
    }
}

const KIB: u64 = 1024;

/// A disk size (`120G`, `4M`, `1.5T`, `512K`; a bare number is bytes in `size=` values) in bytes.
pub fn parse_size(s: &str, bare_unit: char) -> Result<u64, SizeError> {
    let t = s.trim();
    let (num, unit) = match t.chars().last() {
        Some(c) if c.is_ascii_alphabetic() => (&t[..t.len() - 1], c.to_ascii_uppercase()),
        _ => (t, bare_unit),
    };
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| SizeError::NotASize(s.to_string()))?;
    if n < 0.0 || !n.is_finite() {
        return Err(SizeError::NotASize(s.to_string()));
    }
    let mult = match unit {
        'B' => 1,
        'K' => KIB,
        'M' => KIB.pow(2),
        'G' => KIB.pow(3),
        'T' => KIB.pow(4),
        _ => {
            return Err(SizeError::UnknownUnit {
                input: s.to_string(),
                unit,
            })
        }
    };
    Ok((n * mult as f64).round() as u64)
}

/// Bytes → the shortest exact PVE size (`120G`, `4M`, `1536M`).
pub fn format_size(bytes: u64) -> String {
    for (unit, mult) in [
        ('T', KIB.pow(4)),
        ('G', KIB.pow(3)),
        ('M', KIB.pow(2)),
        ('K', KIB),
    ] {
        if bytes >= mult && bytes.is_multiple_of(mult) {
            return format!("{}{unit}", bytes / mult);
        }
    }
    format!("{bytes}")
}

/// `BC:24:11:0A:0B:0C` (upper case, colons) or an error saying why not; only unicast is valid.
pub fn normalize_mac(mac: &str) -> Result<String, MacError> {
    let m = mac.trim().replace('-', ":").to_ascii_uppercase();
    let octets: Vec<&str> = m.split(':').collect();
    if octets.len() != 6
        || octets
            .iter()
            .any(|o| o.len() != 2 || !o.chars().all(|c| c.is_ascii_hexdigit()))
    {
        return Err(MacError::NotAMac(mac.to_string()));
    }
    let first = u8::from_str_radix(octets[0], 16).unwrap_or(1);
    if first & 1 == 1 {
        return Err(MacError::Multicast(mac.to_string()));
    }
    Ok(m)
}

/// Tags as PVE stores them: lower case, sorted, de-duplicated (`ocp;Zeta;alpha` → alpha, ocp, zeta).
pub fn normalize_tags<S: AsRef<str>>(tags: impl IntoIterator<Item = S>) -> Vec<String> {
    let mut v: Vec<String> = tags
        .into_iter()
        .flat_map(|t| {
            t.as_ref()
                .split([';', ',', ' '])
                .map(|x| x.trim().to_lowercase())
                .filter(|x| !x.is_empty())
                .collect::<Vec<_>>()
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// A tag PVE accepts (`pve-tag`: `[a-z0-9_][a-z0-9_\-+.]*`, case-insensitive).
pub fn valid_tag(t: &str) -> bool {
    let mut chars = t.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphanumeric() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || "_-+.".contains(c))
}

/// A VM name PVE accepts (`dns-name`: labels of letters, digits and inner hyphens, dot-joined).
pub fn valid_vm_name(n: &str) -> bool {
    !n.is_empty()
        && n.split('.').all(|l| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_with_default_key_and_render() {
        let p = PropString::parse("local-lvm:vm-101-disk-1,iothread=1,size=120G", Some("file"))
            .unwrap();
        assert_eq!(p.get("file"), Some("local-lvm:vm-101-disk-1"));
        assert_eq!(p.get("size"), Some("120G"));
        assert_eq!(
            p.render(Some("file")),
            "local-lvm:vm-101-disk-1,iothread=1,size=120G"
        );
        let mut q = p.clone();
        q.set("ssd", "1");
        q.remove("size");
        assert_eq!(
            q.render(Some("file")),
            "local-lvm:vm-101-disk-1,iothread=1,ssd=1"
        );
        assert_eq!(
            PropString::parse("virtio=BC:24:11:00:00:01,bridge=vmbr0", Some("model"))
                .unwrap()
                .get("virtio"),
            Some("BC:24:11:00:00:01")
        );
    }

    #[test]
    fn parse_errors() {
        assert!(PropString::parse("a=1,a=2", None)
            .unwrap_err()
            .to_string()
            .contains("duplicate key 'a'"));
        assert!(PropString::parse("x", None)
            .unwrap_err()
            .to_string()
            .contains("no key"));
        assert!(PropString::parse("=1", Some("file")).is_err());
        // Order does not matter for comparison.
        assert_eq!(
            PropString::parse("b=2,a=1", None).unwrap().sorted(),
            PropString::parse("a=1,b=2", None).unwrap().sorted()
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("120G", 'G').unwrap(), 120 << 30);
        assert_eq!(parse_size("4M", 'B').unwrap(), 4 << 20);
        assert_eq!(parse_size("1.5T", 'G').unwrap(), 3 << 39);
        assert_eq!(parse_size("32", 'G').unwrap(), 32 << 30);
        assert_eq!(parse_size("1048576", 'B').unwrap(), 1 << 20);
        assert!(parse_size("12X", 'G')
            .unwrap_err()
            .to_string()
            .contains("unknown size unit"));
        assert!(parse_size("big", 'G').is_err());
        assert_eq!(format_size(120 << 30), "120G");
        assert_eq!(format_size(1536 << 20), "1536M");
        assert_eq!(format_size(2 << 40), "2T");
        assert_eq!(format_size(1000), "1000");
    }

    #[test]
    fn macs() {
        assert_eq!(
            normalize_mac("bc:24:11:0a:0b:0c").unwrap(),
            "BC:24:11:0A:0B:0C"
        );
        assert_eq!(
            normalize_mac("BC-24-11-0A-0B-0C").unwrap(),
            "BC:24:11:0A:0B:0C"
        );
        assert!(normalize_mac("01:00:5e:00:00:01")
            .unwrap_err()
            .to_string()
            .contains("multicast"));
        assert!(normalize_mac("bc:24:11:0a:0b").is_err());
        assert!(normalize_mac("zz:24:11:0a:0b:0c").is_err());
    }

    #[test]
    fn tags_and_names() {
        assert_eq!(
            normalize_tags(["ocp;Zeta;alpha", "OCP"]),
            vec!["alpha", "ocp", "zeta"]
        );
        assert!(normalize_tags(Vec::<String>::new()).is_empty());
        assert!(
            valid_tag("proxshift-owned")
                && valid_tag("k8s.io")
                && !valid_tag("-x")
                && !valid_tag("a b")
        );
        assert!(valid_vm_name("master-0.ocp.example.com"));
        assert!(!valid_vm_name("master_0") && !valid_vm_name("-a") && !valid_vm_name("a..b"));
        assert_eq!(parse_bool("on"), Some(true));
        assert_eq!(parse_bool("0"), Some(false));
        assert_eq!(parse_bool("x"), None);
    }
}
