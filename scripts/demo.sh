#!/usr/bin/env bash
# `make demo`: the main job on the simulator. Until the provisioning flow lands this reports, honestly,
# what is built and which phases exist; it never fakes a phase.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "ProxShift demo"
echo
printf '%-18s %-14s %10s\n' MODULE COLLECTION BYTES
for f in ansible_collections/proxshift/*/plugins/modules/*; do
  case "$f" in *.yml|*.py) continue ;; esac
  coll=$(basename "$(dirname "$(dirname "$(dirname "$f")")")")
  printf '%-18s %-14s %10s\n' "$(basename "$f")" "$coll" "$(stat -c %s "$f")"
done
echo
if [ -f playbooks/site.yaml ] && [ -x scripts/demo-flow.sh ]; then
  exec scripts/demo-flow.sh
fi
echo "The provisioning flow (playbooks/site.yaml) is not in this checkout yet: nothing else to run."
