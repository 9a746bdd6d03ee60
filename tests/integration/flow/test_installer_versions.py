"""Installer per cluster (issue #21 item 1): two clusters of different `ocp_version` in one inventory each
build their ISO with their own copy of the installer double (tests/fixtures/bin/openshift-install, which
reports the version in `<copy>.version`), and a missing or wrong-version installer stops the run in the
preflight, before anything is created in Proxmox (pvesim's request log shows no write). An installer in
neither the map nor the cache is extracted from the release image once (the oc double's `adm release
extract` writes a copy of the installer double reporting the image's release), and a run of the install
phase alone waits with it, not with the global one.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from testlib import REPO

INSTALLER_DOUBLE = REPO / "tests" / "fixtures" / "bin" / "openshift-install"
OC_DOUBLE = REPO / "tests" / "fixtures" / "bin" / "oc"

# Two SNO clusters; the site settings (inventory/group_vars) are the example inventory's.
CLUSTERS = """
all:
  children:
    clusters:
      children:
        old-lab:
          vars:
            ocp_version: "4.16"
            base_domain: lab.example.com
            machine_network: 10.30.0.0/24
            gateway: 10.30.0.1
            dns_servers: [10.30.0.2]
            vm_defaults: {memory: 16384, cores: 4}
          hosts:
            old-lab-0: {ip: 10.30.0.11, mac: "BC:24:11:30:00:11", pve_node: pve1}
        new-lab:
          vars:
            ocp_version: "4.19.7"
            base_domain: lab.example.com
            machine_network: 10.31.0.0/24
            gateway: 10.31.0.1
            dns_servers: [10.31.0.2]
            vm_defaults: {memory: 16384, cores: 4}
          hosts:
            new-lab-0: {ip: 10.31.0.11, mac: "BC:24:11:31:00:11", pve_node: pve2}
"""


def double_copy(where: Path, name: str, version: str) -> Path:
    """A copy of the installer double that reports `version`."""
    where.mkdir(parents=True, exist_ok=True)
    copy = where / name
    shutil.copy2(INSTALLER_DOUBLE, copy)
    Path(f"{copy}.version").write_text(version)
    return copy


def inventory(tmp_path: Path, settings: str) -> Path:
    inv = tmp_path / "inventory"
    shutil.copytree(REPO / "inventory" / "group_vars", inv / "group_vars")
    (inv / "clusters.yml").write_text(CLUSTERS)
    (inv / "group_vars" / "all" / "installers.yml").write_text(settings)
    return inv


@pytest.fixture
def run_site(run_playbook, site, tmp_path):
    calls = tmp_path / "installer-calls"

    # No installer on PATH: only the inventory's installers can be used. oc is there (the installer
    # extracts the base ISO with it; a cache's oc-<version> beside its installer goes first).
    oc_bin = tmp_path / "oc-bin"
    oc_bin.mkdir()
    (oc_bin / "oc").symlink_to(INSTALLER_DOUBLE.parent / "oc")

    def run(cluster: str, inv: Path, env_more: dict | None = None, **kwargs):
        env = site.env(with_installer=False)
        return run_playbook(
            REPO / "playbooks" / "site.yaml",
            inventory=inv,
            extra_vars=site.extra_vars(cluster, **kwargs.pop("extra", {})),
            env={**env, "PATH": f"{oc_bin}:{env['PATH']}", "PROXSHIFT_TEST_INSTALLER_CALLS": str(calls),
                 **(env_more or {})},
            **kwargs,
        )

    return run, calls


def test_each_cluster_builds_with_the_installer_of_its_version(run_site, site, tmp_path):
    old = double_copy(tmp_path / "installers", "oi-4.16", "4.16.3")
    cache = tmp_path / "cache"
    new = double_copy(cache, "openshift-install-4.19.7", "4.19.7")
    (cache / "oc-4.19.7").symlink_to(INSTALLER_DOUBLE.parent / "oc")
    # A minor in the map, an exact version in the cache: each cluster finds its own.
    inv = inventory(tmp_path, f'openshift_installers: {{"4.16": "{old}"}}\nopenshift_install_cache: "{cache}"\n')
    run, calls = run_site
    for cluster in ("old-lab", "new-lab"):
        r = run(cluster, inv, tags="preflight,manifests,iso")
        assert r.rc == 0, r.output
        assert (site.work / cluster / "agent" / "agent.x86_64.iso").is_file()
    log = [line.split("\t") for line in calls.read_text().splitlines()]
    builds = {args.split("--dir=")[1].split("/")[-2]: Path(binary) for args, binary in log
              if args.startswith("agent create image")}
    # The work folder of each build is <work>/<cluster>/.agent-build-PID.
    assert builds == {"old-lab": old, "new-lab": new}, log
    # Each binary's version was checked (preflight and manifests phase), and only those two ran.
    assert {Path(b) for args, b in log if args == "version"} == {old, new}, log
    assert {Path(b) for _, b in log} == {old, new}, log
    # The oc each installer ran with: the cache's oc-4.19.7 beside its installer, else oc on PATH.
    ocs = {c: (site.work / c / "agent" / ".openshift_install.log").read_text() for c in ("old-lab", "new-lab")}
    assert "oc for the release payload: " + str(tmp_path / "oc-bin" / "oc") in ocs["old-lab"], ocs["old-lab"]
    assert ".proxshift-oc/oc" in ocs["new-lab"], ocs["new-lab"]


def test_a_wrong_version_installer_is_refused_before_anything_is_created(run_site, site, tmp_path):
    cache = tmp_path / "cache"
    wrong = double_copy(cache, "openshift-install-4.19.7", "4.19.8")
    inv = inventory(tmp_path, f'openshift_install_cache: "{cache}"\n')
    run, calls = run_site
    seq = site.sim.last_seq()
    r = run("new-lab", inv)
    assert r.rc != 0
    assert "Preflight found" in r.output, r.output
    assert f"Installer: {wrong} is openshift-install 4.19.8, but the cluster's version is 4.19.7" in r.output, r.output
    assert site.sim.writes_since(seq) == [], "something was created in Proxmox"
    assert site.owned_vms("new-lab") == []
    assert not (site.work / "new-lab" / "install-config.yaml").exists()
    assert [line.split("\t")[0] for line in calls.read_text().splitlines()] == ["version"], "only its version was asked"


def test_preflight_says_where_it_looked_for_a_missing_installer(run_site, site, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    # Configured for 4.19 only: the 4.16 cluster has none.
    other = double_copy(tmp_path / "installers", "oi-4.19", "4.19.7")
    inv = inventory(tmp_path, f'openshift_installers: {{"4.19": "{other}"}}\nopenshift_install_cache: "{cache}"\n')
    run, calls = run_site
    seq = site.sim.last_seq()
    r = run("old-lab", inv)
    assert r.rc != 0
    assert "Installer: no openshift-install for version 4.16; looked in: openshift_installers (keys 4.16)" in r.output, \
        r.output
    assert f"{cache}/openshift-install-4.16" in r.output and "'openshift-install' on PATH" in r.output, r.output
    # Nor can it be extracted: a minor names no release image.
    assert "not extracted from a release image: ocp_version 4.16 is a minor" in r.output, r.output
    assert site.sim.writes_since(seq) == []
    assert site.owned_vms("old-lab") == []
    assert not calls.exists(), "an installer of another version was run"


def test_the_installer_is_extracted_once_and_the_install_phase_alone_waits_with_it(run_site, site, tmp_path):
    """new-lab (4.19.7) has no installer in an empty cache and none on PATH: the preflight says it would be
    extracted, the manifests phase extracts it once (the pull secret reaching oc as a 0600 registry config,
    gone afterwards) and builds the ISO with it; then `--tags install` alone, which does not run the manifests
    phase, still waits with that installer and extracts nothing again."""
    cache = tmp_path / "cache"
    inv = inventory(tmp_path, f'openshift_install_cache: "{cache}"\noc_binary: "{OC_DOUBLE}"\n')
    run, calls = run_site
    oc_calls = tmp_path / "oc-calls"
    env = {"PROXSHIFT_TEST_OC_CALLS": str(oc_calls)}
    image = "quay.io/openshift-release-dev/ocp-release:4.19.7-x86_64"
    extracted = cache / "openshift-install-4.19.7"

    built = run("new-lab", inv, env_more=env, tags="preflight,manifests,iso,vms,start")
    assert built.rc == 0, built.output
    # The preflight (check mode) says what it would extract; the manifests phase extracts it.
    preflight, manifests = [r["result"] for r in built.results if "installer_release_image" in r["result"]]
    assert f"would extract openshift-install from {image}" in preflight["msg"], preflight
    assert manifests["installer_source"] == f"release image {image}", manifests
    [call] = oc_calls.read_text().splitlines()
    args, mode = call.split("\t")
    assert args.startswith(f"adm release extract --command=openshift-install --to={cache}/") and args.endswith(f" -- {image}"), call
    assert mode == "registry-config=600", call
    registry_config = Path(args.split("--registry-config=")[1].split(" ")[0])
    assert not registry_config.exists(), "the registry config outlived the extraction"
    assert extracted.is_file()
    log = [line.split("\t") for line in calls.read_text().splitlines()]
    assert [Path(b) for a, b in log if a.startswith("agent create image")] == [extracted], log

    # The install waits only: readiness (tagged install and acm) is left out, so no cluster API is needed.
    waited = run("new-lab", inv, env_more=env, tags="install", args=["--skip-tags", "acm"])
    assert waited.rc == 0, waited.output
    log = [line.split("\t") for line in calls.read_text().splitlines()]
    stages = [(a.split(" --dir")[0], Path(b)) for a, b in log if a.startswith("agent wait-for")]
    assert stages == [("agent wait-for bootstrap-complete", extracted), ("agent wait-for install-complete", extracted)], log
    assert len(oc_calls.read_text().splitlines()) == 1, "extracted again"
    [chosen] = [r["result"] for r in waited.results if "installer_source" in r["result"]]
    assert (chosen["installer_source"], chosen["changed"]) == ("openshift_install_cache", False), chosen
    for r in (built, waited):
        assert site.canary not in r.output
