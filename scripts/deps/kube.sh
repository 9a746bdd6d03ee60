#!/bin/bash
# Installs a real kube-apiserver v1.20.2 (built from Debian's `kubernetes` source package)
# plus Debian's etcd for the kube-client / cluster_auth / acm_import integration tests.
#
# Idempotent: the binaries are cached per machine under $PROXSHIFT_KUBE_CACHE
# (default /var/cache/proxshift/kube-v1.20.2/bin); when they exist nothing else runs.
# Prints the directory to use as KUBEBUILDER_ASSETS on its last line of stdout.
#
# The build takes ~12 min on 2 cores and ~2.2 GB of scratch disk (removed afterwards
# unless KEEP_BUILD=1). Needs root for apt-get.
set -euo pipefail

CACHE=${PROXSHIFT_KUBE_CACHE:-/var/cache/proxshift/kube-v1.20.2}
BIN=$CACHE/bin
SRCVER=1.20.5+really1.20.2

log() { echo "kube.sh: $*" >&2; }

have_cached() {
    [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/etcd" ] &&
        "$BIN/kube-apiserver" --version 2>/dev/null | grep -q 'v1.20.2'
}

# Only etcd lost (package removed)? Reinstall it instead of rebuilding the apiserver.
if [ -x "$BIN/kube-apiserver" ] && [ ! -x "$BIN/etcd" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >&2 || true
    ln -sf "$(command -v etcd || echo /usr/bin/etcd)" "$BIN/etcd"
fi
if have_cached; then
    log "cached binaries present in $BIN"
    echo "$BIN"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
# deb-src entries mirror the existing binary entries (same mirror and suites).
if [ ! -f /etc/apt/sources.list.d/debian-src.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
        >/etc/apt/sources.list.d/debian-src.sources
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends golang-go rsync jq dpkg-dev \
    golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev etcd-server >&2

W=$CACHE/build
mkdir -p "$W" "$BIN"
cd "$W"
if [ ! -d "kubernetes-$SRCVER" ]; then
    apt-get source -qq kubernetes >&2
fi
cd "kubernetes-$SRCVER"

# Vendored reflect2 1.0.1 crashes under Go >= 1.18 on the first custom-resource
# create; swap in Debian's reflect2 1.0.2 and json-iterator 1.1.12.
rm -rf vendor/github.com/modern-go/reflect2 vendor/github.com/json-iterator/go
cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
cp -r /usr/share/gocode/src/github.com/json-iterator/go vendor/github.com/json-iterator/go
find vendor/github.com/modern-go/reflect2 vendor/github.com/json-iterator/go -name '*_test.go' -delete

# GOPATH mode as debian/rules does (module mode fails on the vendored tree).
export GOPATH=$PWD/.go CGO_ENABLED=0 GOPROXY=off HOME=$W/home
mkdir -p .go/src/k8s.io "$HOME"
[ -L .go/src/k8s.io/kubernetes ] || ln -s ../../.. .go/src/k8s.io/kubernetes
cat >"$W/version.env" <<'V'
KUBE_GIT_COMMIT='faecb196815e248d3ecfb03c680a4507229c2a56'
KUBE_GIT_TREE_STATE='clean'
KUBE_GIT_VERSION='v1.20.2'
KUBE_GIT_MAJOR='1'
KUBE_GIT_MINOR='20'
V
export KUBE_GIT_VERSION_FILE=$W/version.env # else the server reports v0.0.0-master
start=$(date +%s)
make WHAT="cmd/kube-apiserver cmd/kube-controller-manager" >&2
log "build took $(($(date +%s) - start)) s"

install -m 0755 _output/bin/kube-apiserver _output/bin/kube-controller-manager "$BIN/"
ln -sf "$(command -v etcd || echo /usr/bin/etcd)" "$BIN/etcd"
cd "$CACHE"
if [ "${KEEP_BUILD:-0}" != 1 ]; then
    rm -rf "$W"
fi
have_cached || { log "build finished but $BIN/kube-apiserver is not v1.20.2"; exit 1; }
log "installed into $BIN"
echo "$BIN"
