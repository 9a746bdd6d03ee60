#!/bin/bash
# The test control plane and the real controllers, built from Go modules (the Go module proxy):
#   kube-apiserver, kube-controller-manager   k8s.io/kubernetes v1.34.x   (scripts/deps/go/kube)
#   etcd                                       go.etcd.io/etcd/server/v3   (scripts/deps/go/etcd)
#   external-secrets                           github.com/external-secrets/external-secrets (scripts/deps/go/eso;
#                                              only the providers the tests use registered: go/eso/overlay)
# Each module pins its versions in go.mod/go.sum; a change to either (or to the overlay) makes a new cache folder.
#
# Idempotent: the binaries are cached per machine under $PROXSHIFT_KUBE_CACHE (default
# /var/cache/proxshift/kube-<hash>/bin); when they exist nothing else runs. A build writes to a temporary
# folder and renames it at the end, so a half-written cache is never reused. Built with -trimpath;
# nothing is downloaded at test time. Prints the folder to use as KUBEBUILDER_ASSETS on its last line.
#
# Cold (empty Go module and build caches) on 2 cores, measured 2026-12-05: kube-apiserver and kube-controller-manager
# 259 s with their downloads, etcd 27 s, external-secrets 92 s (228 s with every provider); the three builds run one
# after the other, Go's own parallelism using both cores; ~5 GB of Go module and build cache.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
GOMODS=$HERE/go
log() { echo "kube.sh: $*" >&2; }

command -v go >/dev/null || { log "Go is not installed (the machine image ships Go 1.26)"; exit 1; }

# The cache key: the pinned modules, and BUILD_REV for a change of how they are built (flags, names).
BUILD_REV=2
key=$( (cat "$GOMODS"/kube/go.{mod,sum} "$GOMODS"/etcd/go.{mod,sum} "$GOMODS"/eso/go.{mod,sum} "$GOMODS"/eso/overlay/*
    echo "$BUILD_REV") |
    sha256sum | cut -c1-12)
ROOT=${PROXSHIFT_CACHE_ROOT:-/var/cache/proxshift}
CACHE=${PROXSHIFT_KUBE_CACHE:-$ROOT/kube-$key}
BIN=$CACHE/bin

have_cached() {
    local b
    for b in kube-apiserver kube-controller-manager etcd external-secrets; do
        [ -x "$BIN/$b" ] || return 1
    done
}
if have_cached; then
    log "cached binaries present in $BIN"
    echo "$BIN"
    exit 0
fi

kube_version=$(cd "$GOMODS/kube" && GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' k8s.io/kubernetes)
[ -n "$kube_version" ] || { log "no k8s.io/kubernetes version in $GOMODS/kube/go.mod"; exit 1; }
minor=${kube_version#v1.}
minor=${minor%%.*}

mkdir -p "$ROOT"
TMP=$(mktemp -d "$ROOT/.kube-build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/bin"
export CGO_ENABLED=0 GOFLAGS="-trimpath -mod=readonly" GOTOOLCHAIN=local

# go build of one module's tool packages into $TMP/bin; a module the proxy cannot serve stops here.
build() { # <module folder, under scripts/deps/go or absolute> <ldflags> <package>...
    local dir=$1 ldflags=$2
    shift 2
    local start
    start=$(date +%s)
    [[ $dir = /* ]] || dir=$GOMODS/$dir
    if ! (cd "$dir" && go build -ldflags "$ldflags" -o "$TMP/bin/" "$@"); then
        log "building $* failed (above: the module Go could not fetch or compile)."
        log "Run scripts/deps/kube.sh alone to retry; it needs the Go module proxy."
        exit 1
    fi
    log "built $* in $(($(date +%s) - start)) s"
}

# kube-apiserver reports its version from component-base's ldflags variables, as upstream's
# hack/lib/version.sh sets them; without them it says v0.0.0-master and discovery clients misjudge it.
v=k8s.io/component-base/version
kube_ld="-s -w -X $v.gitVersion=$kube_version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
kube_ld="$kube_ld -X k8s.io/client-go/pkg/version.gitVersion=$kube_version"
build kube "$kube_ld" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
build etcd "-s -w" go.etcd.io/etcd/server/v3
mv "$TMP/bin/server" "$TMP/bin/etcd" # go names a /vN module's binary after the folder before it
# The External Secrets controller with the providers and generators the tests use registered, no others: its two
# register.go files (nothing but blank imports; each provider's init registers it) are replaced by
# scripts/deps/go/eso/overlay/ in a copy of the module, which a copy of the project's go.mod points at (`replace`;
# Go refuses -overlay inside the module cache). The cloud providers' SDKs took more than half of its cold build.
ESO_MODULE=github.com/external-secrets/external-secrets
eso_dir=$(cd "$GOMODS/eso" && go mod download -json "$ESO_MODULE" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$eso_dir" ] || { log "go mod download $ESO_MODULE gave no folder"; exit 1; }
for kind in provider generator; do
    [ "$(ls "$eso_dir/pkg/$kind/register")" = register.go ] ||
        { log "$eso_dir/pkg/$kind/register: upstream's register package changed; update the overlay"; exit 1; }
done
cp -r "$eso_dir" "$TMP/eso-src"
chmod -R u+w "$TMP/eso-src"
install -m 0644 "$GOMODS/eso/overlay/providers.go.txt" "$TMP/eso-src/pkg/provider/register/register.go"
install -m 0644 "$GOMODS/eso/overlay/generators.go.txt" "$TMP/eso-src/pkg/generator/register/register.go"
mkdir "$TMP/eso-mod"
cp "$GOMODS"/eso/go.{mod,sum} "$TMP/eso-mod/"
(cd "$TMP/eso-mod" && go mod edit -replace "$ESO_MODULE=$TMP/eso-src")
build "$TMP/eso-mod" "-s -w" "$ESO_MODULE"
rm -rf "$TMP/eso-src" "$TMP/eso-mod"
"$TMP/bin/kube-apiserver" --version >&2

rm -rf "$CACHE"
mkdir -p "$(dirname "$CACHE")"
mv "$TMP" "$CACHE"
trap - EXIT
chmod 0755 "$CACHE"
have_cached || { log "build finished but $BIN lacks a binary"; exit 1; }
ln -sfn "$CACHE" "$ROOT/kube-current"
log "installed into $BIN"
echo "$BIN"
