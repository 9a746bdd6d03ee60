# Content-addressed cache of build outputs, sourced by scripts/build.sh and scripts/fuzz.sh.
#
# Cargo decides whether a workspace crate is fresh by its files' mtimes. A fresh clone (every CI run, every
# AWX-style checkout) gives every file a new mtime, so even with the machine's warm Cargo folder each run
# recompiled and re-linked every workspace crate: ~6 min of `make build` and ~2 min of the fuzz build for
# sources that had not changed. This cache is keyed by the sha256 of the *contents* of every build input
# plus the toolchain's versions and the build-affecting environment, so a hit is the output of exactly these
# sources; any change of content, toolchain or flags is a miss and cargo builds as before.
#
# It is used only with the machine's shared Cargo folder (CARGO_TARGET_DIR …/cargo-target, the Makefile's
# default): a checkout's own ./target is cargo's business alone. PROXSHIFT_BUILD_CACHE=0 turns it off.

# Where the outputs live, or nothing when the cache is off (decided once, when this file is sourced, so a
# script may move CARGO_TARGET_DIR afterwards, as fuzz.sh does).
build_outputs_root() {
  [ "${PROXSHIFT_BUILD_CACHE:-1}" != 0 ] || return 0
  case "${CARGO_TARGET_DIR:-}" in
    */cargo-target) echo "$(dirname "$CARGO_TARGET_DIR")/build-outputs" ;;
    *) ;;
  esac
}
BUILD_OUTPUTS_ROOT="${BUILD_OUTPUTS_ROOT-$(build_outputs_root)}"

# build_outputs_key NAME PATH... -- EXTRA...: the key of a build named NAME from the files under the PATHs
# (relative to the current folder, missing ones skipped) and the EXTRA strings (toolchain versions).
build_outputs_key() {
  local name="$1" paths=() extra=()
  shift
  while (( $# )) && [ "$1" != -- ]; do [ -e "$1" ] && paths+=("$1"); shift; done
  (( $# )) && shift
  extra=("$@")
  {
    printf '%s\n' "$name" "${extra[@]}"
    # What else changes what rustc and the linker produce.
    env | grep -E '^(RUSTFLAGS|RUSTDOCFLAGS|CARGO_ENCODED_RUSTFLAGS|CARGO_PROFILE_|CARGO_BUILD_|CARGO_TARGET_[A-Z0-9_]+_(LINKER|RUSTFLAGS)|ZIG_|CC|CFLAGS|ASAN_OPTIONS)' | LC_ALL=C sort
    for c in "$HOME/.cargo/config.toml" "$HOME/.cargo/config"; do [ -f "$c" ] && sha256sum "$c"; done
    find "${paths[@]}" -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
  } | sha256sum | cut -c1-32
}

# build_outputs_fetch KEY: the folder holding KEY's outputs when the cache has them (and marks it used).
build_outputs_fetch() {
  local root="$BUILD_OUTPUTS_ROOT" dir
  [ -n "$root" ] || return 1
  dir="$root/$1"
  [ -f "$dir/.complete" ] || return 1
  touch "$dir"
  echo "$dir"
}

# build_outputs_store KEY FILE...: keep FILEs (basenames must differ) as KEY's outputs. Written to a temporary
# folder renamed at the end, so a half-written entry is never used; the 8 entries used last are kept.
build_outputs_store() {
  local key="$1" root="$BUILD_OUTPUTS_ROOT" tmp
  shift
  [ -n "$root" ] || return 0
  mkdir -p "$root" 2>/dev/null && [ -w "$root" ] || return 0
  [ -d "$root/$key" ] && return 0
  tmp="$(mktemp -d "$root/.tmp.XXXXXX")"
  cp -p "$@" "$tmp/" && touch "$tmp/.complete" && mv -T "$tmp" "$root/$key" 2>/dev/null || rm -rf "$tmp"
  # shellcheck disable=SC2012  # names are hex keys
  ls -1dt "$root"/*/ 2>/dev/null | tail -n +9 | xargs -r rm -rf
}
