//! What the parsers and the spec can refuse, one small type each; the texts are what users see.

/// A property string that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PropStringError {
    #[error("'{item}' in '{input}' has no key (key=value expected)")]
    NoKey { item: String, input: String },
    #[error("empty key in '{input}'")]
    EmptyKey { input: String },
    #[error("duplicate key '{key}' in '{input}'")]
    DuplicateKey { key: String, input: String },
}

/// A size that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("'{0}' is not a size (like 120G, 512M or 1T)")]
    NotASize(String),
    #[error("'{input}': unknown size unit '{unit}' (use K, M, G or T)")]
    UnknownUnit { input: String, unit: char },
}

/// A MAC address Proxmox would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MacError {
    #[error("'{0}' is not a MAC address (like BC:24:11:00:00:01)")]
    NotAMac(String),
    #[error(
        "'{0}' is a multicast MAC address; Proxmox accepts only unicast MACs (first octet even)"
    )]
    Multicast(String),
}

/// A `vmid_range` outside PVE's ids or backwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("vmid_range [{start}, {end}] must satisfy 100 <= start <= end <= 999999999")]
pub struct RangeError {
    pub start: u32,
    pub end: u32,
}

/// A disk, drive or NIC of the spec or of the current config that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("disk {slot}: size {source}")]
    DiskSize {
        slot: String,
        #[source]
        source: SizeError,
    },
    #[error("{slot}: cannot parse '{value}': {source}")]
    Drive {
        slot: String,
        value: String,
        #[source]
        source: PropStringError,
    },
    #[error("{slot}: {source}")]
    DriveSize {
        slot: String,
        #[source]
        source: SizeError,
    },
    #[error(transparent)]
    NicProps(#[from] PropStringError),
    #[error("no NIC model in '{0}'")]
    NoNicModel(String),
    #[error(transparent)]
    NicValueMac(#[from] MacError),
    #[error("{slot}: mac {source}")]
    NicMac {
        slot: String,
        #[source]
        source: MacError,
    },
}
