#!/usr/bin/env bash
# `make bench`: speed and footprint of the modules against pvesim, printed as one Markdown table
# (scripts/bench.py). Not part of `make test`; never fails on a missed target, only on a broken setup.
#
# The comparison with community.proxmox's proxmox_kvm needs PyPI's `ansible` package (which ships the
# community.proxmox collection) plus proxmoxer and requests: scripts/deps/community-proxmox.sh installs
# them in their own cached venv. If they cannot be installed the table says so.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! BENCH_VENV=$(scripts/deps/community-proxmox.sh); then
  echo "WARNING: the comparison venv could not be installed; proxmox_kvm will be reported as not measured" >&2
  BENCH_VENV=/nonexistent
fi
export BENCH_VENV
[ -x /usr/bin/time ] || { echo "GNU time (/usr/bin/time) is needed for peak RSS: apt-get install time" >&2; exit 1; }
export PVESIM_BIN="${PVESIM_BIN:-build/bin/pvesim}"
exec "${PROXSHIFT_VENV:-.venv}/bin/python" scripts/bench.py "$@"
