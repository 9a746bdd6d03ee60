//! IP addresses and CIDR blocks for either family, as plain integer arithmetic (no I/O).

use std::fmt;
use std::net::{AddrParseError, IpAddr, Ipv4Addr, Ipv6Addr};
use std::num::ParseIntError;

/// Why a string is not a CIDR block.
#[derive(Debug, thiserror::Error)]
pub enum CidrError {
    #[error("'{0}' is not a CIDR (expected ADDRESS/PREFIX)")]
    NoPrefix(String),
    #[error("'{addr}' in '{cidr}' is not an IP address")]
    Address {
        addr: String,
        cidr: String,
        #[source]
        source: AddrParseError,
    },
    #[error("prefix length '{prefix}' in '{cidr}' is not a number")]
    PrefixNotNumber {
        prefix: String,
        cidr: String,
        #[source]
        source: ParseIntError,
    },
    #[error("prefix length /{prefix} in '{cidr}' is longer than the address ({bits} bits)")]
    PrefixTooLong { prefix: u8, cidr: String, bits: u8 },
}

/// Why a string is not a NIC's MAC address.
#[derive(Debug, thiserror::Error)]
pub enum MacError {
    #[error("'{0}' is not a 48-bit MAC address (expected six hex octets like bc:24:11:00:00:01)")]
    Format(String),
    #[error("'{0}' is a multicast MAC address (lowest bit of the first octet set); a NIC needs a unicast one")]
    Multicast(String),
    #[error("{0}")]
    Octet(#[from] ParseIntError),
}

/// A CIDR block as written by the user (`addr` may have host bits set; see [`Cidr::is_network`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

/// The address as a 128-bit number; IPv4 and IPv6 never compare with each other (see `same_family`).
pub fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v) => u32::from(v) as u128,
        IpAddr::V6(v) => u128::from(v),
    }
}

fn from_u128(v: u128, like: IpAddr) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(v as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(v)),
    }
}

pub fn bits(ip: IpAddr) -> u8 {
    if ip.is_ipv4() {
        32
    } else {
        128
    }
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Cidr, CidrError> {
        let (a, p) = s
            .split_once('/')
            .ok_or_else(|| CidrError::NoPrefix(s.into()))?;
        let addr: IpAddr = a.parse().map_err(|source| CidrError::Address {
            addr: a.into(),
            cidr: s.into(),
            source,
        })?;
        let prefix: u8 = p.parse().map_err(|source| CidrError::PrefixNotNumber {
            prefix: p.into(),
            cidr: s.into(),
            source,
        })?;
        if prefix > bits(addr) {
            return Err(CidrError::PrefixTooLong {
                prefix,
                cidr: s.into(),
                bits: bits(addr),
            });
        }
        Ok(Cidr { addr, prefix })
    }

    fn mask(&self) -> u128 {
        let b = bits(self.addr) as u32;
        let host = b - self.prefix as u32;
        let all = if b == 128 {
            u128::MAX
        } else {
            (1u128 << b) - 1
        };
        if host >= 128 {
            0
        } else {
            all & !((1u128 << host) - 1)
        }
    }

    pub fn network(&self) -> IpAddr {
        from_u128(to_u128(self.addr) & self.mask(), self.addr)
    }

    /// True when no host bits are set (what the installer calls a valid "network address").
    pub fn is_network(&self) -> bool {
        self.network() == self.addr
    }

    /// The last address of the block (the IPv4 broadcast address).
    pub fn last(&self) -> IpAddr {
        let b = bits(self.addr) as u32;
        let all = if b == 128 {
            u128::MAX
        } else {
            (1u128 << b) - 1
        };
        from_u128(
            (to_u128(self.addr) & self.mask()) | (all & !self.mask()),
            self.addr,
        )
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4()
            && (to_u128(ip) & self.mask()) == (to_u128(self.addr) & self.mask())
    }

    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.addr.is_ipv4() == other.addr.is_ipv4()
            && (self.contains(other.network()) || other.contains(self.network()))
    }

    /// The address `offset` after the network address, if still inside the block.
    pub fn nth(&self, offset: u128) -> Option<IpAddr> {
        let base = to_u128(self.network());
        let ip = from_u128(base.checked_add(offset)?, self.addr);
        self.contains(ip).then_some(ip)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// The next address (`None` past the end of the family).
pub fn next_ip(ip: IpAddr) -> Option<IpAddr> {
    let v = to_u128(ip).checked_add(1)?;
    match ip {
        IpAddr::V4(_) if v > u32::MAX as u128 => None,
        _ => Some(from_u128(v, ip)),
    }
}

/// A unicast EUI-48 MAC in any of the separators the installer accepts (`:`, `-`, `.` groups),
/// normalised to lowercase `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Result<String, MacError> {
    let hex: String = s
        .chars()
        .filter(|c| !matches!(c, ':' | '-' | '.'))
        .collect();
    let grouped_ok = {
        let colon: Vec<&str> = s.split([':', '-']).collect();
        let dot: Vec<&str> = s.split('.').collect();
        (colon.len() == 6 && colon.iter().all(|g| g.len() == 2))
            || (dot.len() == 3 && dot.iter().all(|g| g.len() == 4))
    };
    if !grouped_ok || hex.len() != 12 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(MacError::Format(s.into()));
    }
    let first = u8::from_str_radix(&hex[0..2], 16)?;
    if first & 1 == 1 {
        return Err(MacError::Multicast(s.into()));
    }
    let lower = hex.to_ascii_lowercase();
    Ok((0..6)
        .map(|i| &lower[i * 2..i * 2 + 2])
        .collect::<Vec<_>>()
        .join(":"))
}

/// RFC 1123 label: 1–63 of `a-z0-9-`, starting and ending alphanumeric.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// RFC 1123 subdomain: dot-separated labels, ≤ 253 characters (one trailing dot allowed).
pub fn is_dns_subdomain(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_math() {
        let c = Cidr::parse("192.168.10.0/24").unwrap();
        assert!(c.is_network());
        assert!(c.contains("192.168.10.77".parse().unwrap()));
        assert!(!c.contains("192.168.11.1".parse().unwrap()));
        assert_eq!(c.last().to_string(), "192.168.10.255");
        assert_eq!(c.nth(5).unwrap().to_string(), "192.168.10.5");
        assert!(c.nth(256).is_none());
        assert!(!Cidr::parse("192.168.10.1/24").unwrap().is_network());
        assert!(Cidr::parse("10.128.0.0/14")
            .unwrap()
            .overlaps(&Cidr::parse("10.130.0.0/16").unwrap()));
        assert!(!Cidr::parse("10.128.0.0/14")
            .unwrap()
            .overlaps(&Cidr::parse("10.132.0.0/16").unwrap()));
        assert!(!Cidr::parse("0.0.0.0/0")
            .unwrap()
            .overlaps(&Cidr::parse("::/0").unwrap()));
        assert!(Cidr::parse("fd00::/64")
            .unwrap()
            .contains("fd00::5".parse().unwrap()));
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("10.0.0.0").is_err());
        assert_eq!(
            Cidr::parse("0.0.0.0/0").unwrap().last().to_string(),
            "255.255.255.255"
        );
    }

    #[test]
    fn macs() {
        assert_eq!(parse_mac("BC:24:11:AA:00:01").unwrap(), "bc:24:11:aa:00:01");
        assert_eq!(parse_mac("bc-24-11-aa-00-01").unwrap(), "bc:24:11:aa:00:01");
        assert_eq!(parse_mac("bc24.11aa.0001").unwrap(), "bc:24:11:aa:00:01");
        assert!(parse_mac("01:00:5e:00:00:01")
            .unwrap_err()
            .to_string()
            .contains("multicast"));
        assert!(parse_mac("bc:24:11:aa:00").is_err());
        assert!(parse_mac("bc:24:11:aa:00:0g").is_err());
    }

    #[test]
    fn dns_names() {
        assert!(is_dns_label("lab-1"));
        assert!(!is_dns_label("Lab"));
        assert!(!is_dns_label("-a"));
        assert!(is_dns_subdomain("example.com."));
        assert!(!is_dns_subdomain("example..com"));
    }

    #[test]
    fn errors_say_which_part_is_wrong_and_keep_the_cause() {
        use std::error::Error;
        let e = Cidr::parse("10.0.0.x/24").unwrap_err();
        assert!(matches!(e, CidrError::Address { .. }), "{e:?}");
        assert!(e.source().is_some_and(|s| s.is::<AddrParseError>()));
        let e = Cidr::parse("10.0.0.0/x").unwrap_err();
        assert!(e.source().is_some_and(|s| s.is::<ParseIntError>()));
        assert!(matches!(
            Cidr::parse("10.0.0.0/33"),
            Err(CidrError::PrefixTooLong {
                prefix: 33,
                bits: 32,
                ..
            })
        ));
        assert!(matches!(
            parse_mac("01:00:5e:00:00:01"),
            Err(MacError::Multicast(_))
        ));
    }
}
