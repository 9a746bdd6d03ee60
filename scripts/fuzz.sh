#!/usr/bin/env bash
# Run every cargo-fuzz target under fuzz/ for SECONDS each (default 25; `make test` runs 15 s each;
# `make fuzz` passes a longer time). Fails on the first crash, panic, hang (> 10 s per input) or runaway
# allocation; the input is left in fuzz/artifacts/<target>/ and replays with
#   (cd fuzz && cargo +nightly fuzz run -O <target> artifacts/<target>/<file>)
# Committed seeds are in fuzz/seeds/<target>/; the growing corpus in fuzz/corpus/<target>/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-25}"
command -v cargo-fuzz >/dev/null || bash scripts/deps/fuzz.sh
# libFuzzer's sanitizer flags are nightly features. The nightly toolchain when rustup has (or can install)
# one; otherwise stable with RUSTC_BOOTSTRAP=1, which unlocks the same flags: the step runs either way.
if rustup run nightly rustc --version >/dev/null 2>&1 || rustup toolchain install nightly --profile minimal >&2; then
  fuzz() { cargo +nightly fuzz "$@"; }
else
  echo "fuzz.sh: no nightly toolchain; fuzzing with stable and RUSTC_BOOTSTRAP=1" >&2
  fuzz() { RUSTC_BOOTSTRAP=1 cargo +stable fuzz "$@"; }
fi
# Own target dir: the sanitizer build must not invalidate the normal build's artefacts.
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-$PWD/target}-fuzz}"
cd fuzz
targets=$(fuzz list)
fuzz build -O
for t in $targets; do
  mkdir -p "corpus/$t" "seeds/$t" "artifacts/$t"
  echo "== fuzz $t for ${SECONDS_EACH}s"
  log="artifacts/$t/last-run.log"
  if ! fuzz run -O "$t" "corpus/$t" "seeds/$t" -- \
      -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="artifacts/$t/" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz target $t FAILED: the input is in fuzz/artifacts/$t/" >&2
    exit 1
  fi
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
done
