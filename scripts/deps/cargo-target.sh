#!/usr/bin/env bash
# Cargo's shared build folder (the Makefile's CARGO_TARGET_DIR, by default /var/cache/proxshift/cargo-target)
# keeps every checkout's workspace artefacts beside the shared dependencies and never forgets any: empty it
# when it outgrows PROXSHIFT_CARGO_CACHE_GIB (default 40), so the next build starts cold once.
set -euo pipefail
dir="${CARGO_TARGET_DIR:-}"
limit_gib="${PROXSHIFT_CARGO_CACHE_GIB:-40}"
case "$dir" in
  */cargo-target) ;;
  *) exit 0 ;;  # a checkout's own ./target (or a folder the user chose) is theirs to manage
esac
for d in "$dir" "$dir-fuzz"; do
  [ -d "$d" ] || continue
  used_kib=$(du -sk "$d" | cut -f1)
  if (( used_kib > limit_gib * 1024 * 1024 )); then
    echo "cargo-target.sh: $d holds $((used_kib / 1024 / 1024)) GiB (> $limit_gib GiB): emptying it" >&2
    rm -rf "$d"
  fi
done
echo "cargo build folder: $dir"
