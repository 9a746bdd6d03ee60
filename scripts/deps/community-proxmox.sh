#!/usr/bin/env bash
# Install community.proxmox (from PyPI's `ansible` package) with proxmoxer and requests in their own venv:
# an unmodified third-party Proxmox client. The pvesim conformance test drives the simulator with it, and
# `make bench` compares proxmox_vm with its proxmox_kvm. Idempotent and cached per machine (the `ansible`
# package is large); the project venv stays as it is. Prints the venv path on stdout.
set -euo pipefail
ANSIBLE_VERSION=12.3.0
PROXMOXER_VERSION=2.3.0
VENV=${BENCH_VENV:-/var/cache/proxshift/bench-venv}
stamp="$VENV/.stamp-ansible-$ANSIBLE_VERSION-proxmoxer-$PROXMOXER_VERSION"
if [ ! -e "$stamp" ]; then
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check \
        "ansible==$ANSIBLE_VERSION" "proxmoxer==$PROXMOXER_VERSION" requests >&2
    "$VENV/bin/python" -c "import proxmoxer, ansible_collections.community.proxmox.plugins.modules.proxmox_kvm" >&2
    touch "$stamp"
fi
echo "$VENV"
