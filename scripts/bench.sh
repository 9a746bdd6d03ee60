#!/usr/bin/env bash
# `make bench`: speed and footprint of the modules against pvesim, printed as one Markdown table
# (scripts/bench.py). Not part of `make test`; never fails on a missed target, only on a broken setup.
#
# The comparison with community.proxmox's proxmox_kvm needs PyPI's `ansible` package (which ships the
# community.proxmox collection) plus proxmoxer and requests; they go into their own venv, cached under
# /var/cache/proxshift, so the project venv stays as it is. If they cannot be installed the table says so.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_VENV="${BENCH_VENV:-/var/cache/proxshift/bench-venv}"
mkdir -p "$(dirname "$BENCH_VENV")" 2>/dev/null || BENCH_VENV="$PWD/.cache/bench-venv"
if [ ! -e "$BENCH_VENV/.stamp" ]; then
  echo "== installing the comparison venv in $BENCH_VENV (ansible 12.3.0, proxmoxer 2.3.0)" >&2
  if python3 -m venv "$BENCH_VENV" >&2 && "$BENCH_VENV/bin/pip" install -q "ansible==12.3.0" "proxmoxer==2.3.0" requests >&2; then
    touch "$BENCH_VENV/.stamp"
  else
    echo "WARNING: the comparison venv could not be installed; proxmox_kvm will be reported as not measured" >&2
  fi
fi
export BENCH_VENV
[ -x /usr/bin/time ] || { echo "GNU time (/usr/bin/time) is needed for peak RSS: apt-get install time" >&2; exit 1; }
export PVESIM_BIN="${PVESIM_BIN:-${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/pvesim}"
exec "${PROXSHIFT_VENV:-.venv}/bin/python" scripts/bench.py
