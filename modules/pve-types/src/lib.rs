//! Pure Proxmox VE types (in progress).
