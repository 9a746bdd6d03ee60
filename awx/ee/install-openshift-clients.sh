#!/usr/bin/env bash
# Put one OpenShift release's openshift-install and oc into an installer cache, under the names
# proxshift.openshift.ocp_manifests looks for (openshift-install-<version>, oc-<version>).
#
#   install-openshift-clients.sh VERSION CACHE_DIR [SOURCE]
#
# SOURCE is a folder holding the release's client tarballs (openshift-install-linux-VERSION.tar.gz and
# openshift-client-linux-VERSION.tar.gz, as the mirror names them), or a mirror base URL under which
# VERSION/ holds them (default: the public mirror for this machine's architecture). When the source has
# the release's sha256sum.txt (the mirror publishes one), every tarball must match it. The extracted
# installer must report VERSION (`openshift-install version`), or nothing is installed.
# Used by the execution environment build (awx/execution-environment.yml) and usable on any controller.
set -euo pipefail

die() { echo "install-openshift-clients: $*" >&2; exit 1; }
[[ $# -ge 2 && $# -le 3 ]] || die "usage: $0 VERSION CACHE_DIR [SOURCE_DIR_OR_MIRROR_URL]"
version=$1 cache=$2
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "VERSION must be an exact release such as 4.19.7, not '$version'"
case "$(uname -m)" in
  x86_64) arch=x86_64; suffix=linux ;;
  aarch64) arch=aarch64; suffix=linux-arm64 ;;
  *) die "no OpenShift clients are published for $(uname -m)" ;;
esac
source=${3:-https://mirror.openshift.com/pub/openshift-v4/$arch/clients/ocp}
installer_tar="openshift-install-$suffix-$version.tar.gz"
client_tar="openshift-client-$suffix-$version.tar.gz"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fetch() { # name → $work/name; a missing sha256sum.txt is allowed, a missing tarball is not
  local name=$1 optional=${2:-}
  if [[ "$source" == http://* || "$source" == https://* ]]; then
    if ! curl -fsSL --retry 3 -o "$work/$name" "$source/$version/$name"; then
      [[ -n "$optional" ]] && { rm -f "$work/$name"; return 0; }
      die "cannot download $source/$version/$name"
    fi
  elif [[ -f "$source/$name" ]]; then
    cp "$source/$name" "$work/$name"
  elif [[ -f "$source/$version/$name" ]]; then
    cp "$source/$version/$name" "$work/$name"
  elif [[ -z "$optional" ]]; then
    die "$name is not in $source (nor in $source/$version)"
  fi
}

fetch "$installer_tar"
fetch "$client_tar"
fetch sha256sum.txt optional
if [[ -f "$work/sha256sum.txt" ]]; then
  for tarball in "$installer_tar" "$client_tar"; do
    grep -E "  $tarball\$" "$work/sha256sum.txt" >"$work/expected" || die "sha256sum.txt does not list $tarball"
    (cd "$work" && sha256sum --quiet -c expected) || die "$tarball does not match its sha256sum.txt entry"
  done
fi

mkdir -p "$work/installer" "$work/client"
tar -xzf "$work/$installer_tar" -C "$work/installer" openshift-install || die "$installer_tar holds no openshift-install"
tar -xzf "$work/$client_tar" -C "$work/client" oc || die "$client_tar holds no oc"

# awk reads to the end: `head -n 1` would close the pipe early and, under pipefail, fail on SIGPIPE.
reported=$("$work/installer/openshift-install" version | awk 'NR == 1 {print $NF}')
[[ "$reported" == "$version" ]] || die "$installer_tar holds openshift-install $reported, not $version"

mkdir -p "$cache"
install -m 0755 "$work/installer/openshift-install" "$cache/openshift-install-$version"
install -m 0755 "$work/client/oc" "$cache/oc-$version"
echo "installed openshift-install-$version and oc-$version into $cache"
