#!/usr/bin/env bash
# Run every cargo-fuzz target under fuzz/ for SECONDS each (default 25: the short run of `make test`;
# `make fuzz` passes a longer time). Fails on the first crash, panic, hang (> 10 s per input) or runaway
# allocation; the input is left in fuzz/artifacts/<target>/ and replays with
#   (cd fuzz && cargo +nightly fuzz run -O <target> artifacts/<target>/<file>)
# Committed seeds are in fuzz/seeds/<target>/; the growing corpus in fuzz/corpus/<target>/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-25}"
command -v cargo-fuzz >/dev/null || bash scripts/deps/fuzz.sh
# Own target dir: the sanitizer build must not invalidate the normal build's artefacts.
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-$PWD/target}-fuzz}"
cd fuzz
targets=$(cargo +nightly fuzz list)
cargo +nightly fuzz build -O
for t in $targets; do
  mkdir -p "corpus/$t" "seeds/$t" "artifacts/$t"
  echo "== fuzz $t for ${SECONDS_EACH}s"
  log="artifacts/$t/last-run.log"
  if ! cargo +nightly fuzz run -O "$t" "corpus/$t" "seeds/$t" -- \
      -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="artifacts/$t/" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz target $t FAILED: the input is in fuzz/artifacts/$t/" >&2
    exit 1
  fi
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
done
