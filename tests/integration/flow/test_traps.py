"""Traps users hit (issue #36): an unquoted `openshift_installers` version key, `--skip-tags iso` leaving the
preflight without the install secrets, an installer cache an extraction cannot write to (read-only in an
execution environment), and the acm role's `auto_import_retry`. Each through real ansible-playbook against
pvesim and OpenBao (the flow conftest's `site`), and each stops before anything is created in Proxmox.
"""
from __future__ import annotations

import json

from test_installer_versions import double_copy, inventory, run_site  # noqa: F401 (run_site is a fixture)


def refused_by_the_preflight(run_site, site, cluster: str, inv) -> str:
    """Run the preflight of `cluster`; it must fail with nothing written to Proxmox and no installer run.
    Returns the run's output."""
    run, calls = run_site
    seq = site.sim.last_seq()
    r = run(cluster, inv, tags="preflight")
    assert r.rc != 0, r.output
    assert site.sim.writes_since(seq) == []
    assert not calls.exists(), "an installer was run"
    return r.output


def test_an_unquoted_installer_version_key_is_refused_naming_the_fix(run_site, site, tmp_path):
    old = double_copy(tmp_path / "installers", "oi-4.16", "4.16.3")
    # `4.16:` unquoted is the YAML number 4.16 (and `4.10:` would be 4.1).
    inv = inventory(tmp_path, f"openshift_installers: {{4.16: \"{old}\"}}\n")
    out = refused_by_the_preflight(run_site, site, "old-lab", inv)
    assert "openshift_installers has the unquoted version key(s) 4.16" in out, out
    assert 'Quote every version, e.g. openshift_installers: {"4.10": /opt/oi-4.10}' in out, out


def test_skip_tags_iso_leaves_the_secrets_to_the_preflight(run_flow, site):
    # --skip-tags iso used to skip the secrets task too (it carried the iso tag), so the preflight stopped
    # asking for a secrets phase that cannot be run on its own.
    r = run_flow("site.yaml", "lab-sno", with_installer=True, tags="preflight", args=["--skip-tags", "iso"])
    assert r.rc == 0, r.output
    assert "Preflight passed" in r.output, r.output
    read = [t for t in r.results if t["task"].endswith("Read the secrets from Vault")]
    assert [t["status"] for t in read] == ["ok"], [(t["task"], t["status"]) for t in r.results]
    assert site.owned_vms("lab-sno") == []


def test_preflight_names_an_installer_cache_it_cannot_extract_into(run_site, site, tmp_path):
    # The cache path lies under a file: nothing can be written there, as in a read-only EE folder.
    blocker = tmp_path / "read-only"
    blocker.write_text("")
    cache = blocker / "installers"
    inv = inventory(tmp_path, f'openshift_install_cache: "{cache}"\nrequire_installer: true\n')
    out = refused_by_the_preflight(run_site, site, "new-lab", inv)
    assert "Preflight found" in out, out
    assert f"openshift_install_cache {cache} is not writable" in out, out
    assert "give a writable folder" in out, out


ACM_PLAY = """
- hosts: localhost
  gather_facts: false
  roles:
    - role: proxshift.openshift.acm
      vars:
        acm_cluster_name: trap-acm
        acm_hub_host: https://127.0.0.1:1
        acm_hub_api_key: not-a-real-token
        acm_wait: false
        acm_auto_import_retry: {retry}
"""


def test_the_acm_role_passes_auto_import_retry(run_playbook):
    # A wrong type is refused by the role's argument spec, naming the variable.
    bad = run_playbook(ACM_PLAY.format(retry="many"))
    assert bad.rc != 0
    assert "acm_auto_import_retry" in bad.stdout + bad.stderr, bad.stdout
    # The value reaches acm_import (the hub is unreachable: the task fails after taking its arguments).
    r = run_playbook(ACM_PLAY.format(retry=7))
    assert r.rc != 0
    calls = [t for t in r.results if t["action"].endswith("acm_import")]
    assert calls, json.dumps(r.results)[:2000]
    args = calls[0]["result"].get("invocation", {}).get("module_args", {})
    assert args.get("auto_import_retry") == 7, calls[0]["result"]
