#!/usr/bin/env bash
# Run every cargo-fuzz target under fuzz/ for SECONDS each (default 25; `make test` runs 15 s each;
# `make fuzz` passes a longer time). Fails on a crash, panic, hang (> 10 s per input) or runaway allocation,
# once the targets fuzzing beside it are done; the input is left in fuzz/artifacts/<target>/ and replays with
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
  toolchain=nightly
else
  echo "fuzz.sh: no nightly toolchain; fuzzing with stable and RUSTC_BOOTSTRAP=1" >&2
  fuzz() { RUSTC_BOOTSTRAP=1 cargo +stable fuzz "$@"; }
  toolchain=stable
fi
# Sanitizer builds of sources fuzzed before come from the machine's cache (scripts/lib/build-outputs.sh), keyed by
# the contents of everything they are built from: a fresh clone's new mtimes would rebuild them all.
# shellcheck source=scripts/lib/build-outputs.sh
. scripts/lib/build-outputs.sh
key=$(build_outputs_key fuzz Cargo.toml Cargo.lock modules fuzz/Cargo.toml fuzz/Cargo.lock fuzz/fuzz_targets \
  scripts/fuzz.sh scripts/lib/build-outputs.sh -- "$(rustup run "$toolchain" rustc -Vv)" "$(cargo fuzz --version)")
# Own target dir: the sanitizer build must not invalidate the normal build's artefacts.
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-$PWD/target}-fuzz}"
cd fuzz
targets=$(fuzz list)
if bins=$(build_outputs_fetch "$key"); then
  echo "fuzz: sanitizer builds of these sources from $bins"
else
  fuzz build -O
  bins="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release"
  # shellcheck disable=SC2086  # target names have no spaces
  build_outputs_store "$key" $(for t in $targets; do echo "$bins/$t"; done)
fi
# libFuzzer runs one single-threaded process per target: FUZZ_JOBS targets (default one per core) fuzz side by side,
# each for the full SECONDS_EACH.
jobs=${FUZZ_JOBS:-$(nproc)}
fuzz_one() { # <target>: what `cargo fuzz run -O` runs once built — the target with its artifact prefix and
  # cargo-fuzz's ASan default; the log in artifacts/<target>/last-run.log
  local t=$1
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0" "$bins/$t" \
    -artifact_prefix="artifacts/$t/" "corpus/$t" "seeds/$t" \
    -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"artifacts/$t/last-run.log" 2>&1
}
# shellcheck disable=SC2086  # target names have no spaces
set -- $targets
failed=()
while (($#)); do
  batch=("${@:1:jobs}")
  shift "${#batch[@]}"
  pids=()
  for t in "${batch[@]}"; do
    mkdir -p "corpus/$t" "seeds/$t" "artifacts/$t"
    echo "== fuzz $t for ${SECONDS_EACH}s"
    fuzz_one "$t" &
    pids+=($!)
  done
  for i in "${!batch[@]}"; do
    t=${batch[i]}
    if wait "${pids[i]}"; then
      grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "artifacts/$t/last-run.log" | sed "s/^/$t: /" || true
    else
      tail -n 60 "artifacts/$t/last-run.log" >&2
      echo "fuzz target $t FAILED: the input is in fuzz/artifacts/$t/" >&2
      failed+=("$t")
    fi
  done
  # A crash, panic, hang or runaway allocation stops the run once its batch is done.
  ((${#failed[@]} == 0)) || exit 1
done
