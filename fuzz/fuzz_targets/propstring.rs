//! The Proxmox property-string parser and the value parsers built on it (sizes, MACs, drive specs,
//! config canonicalisation): never a panic; what parses renders back to the same entries.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pve_types::propstring::{normalize_mac, parse_size, PropString};

const DEFAULT_KEYS: [Option<&str>; 4] = [None, Some("file"), Some("model"), Some("cputype")];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let s = String::from_utf8_lossy(rest);
    let dk = DEFAULT_KEYS[sel as usize % DEFAULT_KEYS.len()];

    match PropString::parse(&s, dk) {
        Ok(p) => {
            // Round trip: render (with and without the lead key) and parse again gives the same entries.
            let again =
                PropString::parse(&p.render(None), dk).expect("a rendered property string parses");
            assert_eq!(
                again.sorted(),
                p.sorted(),
                "render/parse round trip of {s:?}"
            );
            if let Some(lead) = dk {
                // An empty lead value would vanish in the rendered form; only compare when it survives.
                if p.get(lead)
                    .is_some_and(|v| !v.is_empty() && !v.contains('='))
                {
                    let led =
                        PropString::parse(&p.render(Some(lead)), dk).expect("lead form parses");
                    assert_eq!(led.sorted(), p.sorted(), "lead round trip of {s:?}");
                }
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    for unit in ['B', 'K', 'M', 'G'] {
        // Sizes go through f64 (like PVE's own parser): exact up to 2^53 bytes (8 PiB).
        if let Some(bytes) = parse_size(&s, unit).ok().filter(|b| *b <= 1 << 53) {
            let shown = pve_types::propstring::format_size(bytes);
            assert_eq!(
                parse_size(&shown, 'B'),
                Ok(bytes),
                "format_size({bytes}) = {shown:?} does not parse back"
            );
        }
    }
    if let Ok(mac) = normalize_mac(&s) {
        assert_eq!(
            normalize_mac(&mac).as_deref(),
            Ok(mac.as_str()),
            "normalize_mac is not idempotent"
        );
    }
    // Drive and config parsing of whatever a (possibly hostile) API returns.
    for slot in ["scsi0", "ide2", "efidisk0", "net0", "sata1", "virtio3"] {
        let _ = pve_types::spec::CurrentDrive::parse(slot, &s);
        let _ = pve_types::diff::canonical(slot, Some(&s));
    }
    for key in ["tags", "boot", "cpu", "memory", "agent", "smbios1"] {
        let _ = pve_types::diff::canonical(key, Some(&s));
    }
});
