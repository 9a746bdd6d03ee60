#!/usr/bin/env bash
# Release one collection: `make release COLLECTION=proxmox VERSION=1.1.0` (or scripts/release.sh proxmox 1.1.0).
#
# 1. checks VERSION is a semantic version above the collection's current one and that changelog fragments
#    say what changed (tests/integration/galaxy/test_versioning.py requires one for every change);
# 2. sets galaxy.yml's version and points awx/execution-environment.yml and the collection's README at the new tarball;
# 3. turns the fragments into the release with antsibull-changelog (changelogs/changelog.yaml, CHANGELOG.rst;
#    the fragments are removed);
# 4. builds the tarball into build/ (the binaries must be built: `make release` runs `make build` first).
# Commit the result; that commit is the release test_versioning.py counts changes from.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 COLLECTION VERSION   (COLLECTION: proxmox, hashi_vault or openshift; VERSION: X.Y.Z)" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
coll=$1 version=$2
root="ansible_collections/proxshift/$coll"
[[ -f "$root/galaxy.yml" ]] || { echo "release: no collection '$coll' (proxmox, hashi_vault or openshift)" >&2; exit 2; }
[[ "$version" =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]] ||
  { echo "release: VERSION '$version' is not a semantic version X.Y.Z" >&2; exit 2; }
current=$(sed -n 's/^version: *//p' "$root/galaxy.yml")
if [[ "$version" == "$current" || "$(printf '%s\n%s\n' "$current" "$version" | sort -V | tail -1)" != "$version" ]]; then
  echo "release: VERSION $version is not above proxshift.$coll's current $current" >&2; exit 2
fi
if ! compgen -G "$root/changelogs/fragments/*.y*ml" >/dev/null; then
  echo "release: $root/changelogs/fragments/ is empty: add a fragment saying what changed" >&2; exit 2
fi
command -v antsibull-changelog >/dev/null ||
  { echo "release: antsibull-changelog not found: run 'make venv' (requirements-dev.txt)" >&2; exit 1; }

sed -i "s/^version: .*/version: $version/" "$root/galaxy.yml"
sed -i "s|proxshift-$coll-$current.tar.gz|proxshift-$coll-$version.tar.gz|" awx/execution-environment.yml "$root/README.md"
(cd "$root" && antsibull-changelog release --version "$version")
mkdir -p build
ansible-galaxy collection build --force --output-path build "$root"
echo "proxshift.$coll $version released: commit galaxy.yml, changelogs/, CHANGELOG.rst, README.md and awx/execution-environment.yml"
