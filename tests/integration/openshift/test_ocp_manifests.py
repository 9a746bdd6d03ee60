"""proxshift.openshift.ocp_manifests under real ansible-playbook: render, rerun, check mode, diff,
validation failures, secret masking, and the agent ISO through the openshift-install test double."""
from __future__ import annotations

import json
import stat

import pytest
import yaml

from testlib import REPO

# Canary secrets: they must never appear in any output. The pull secret also holds quotes, which
# broke the original template's single-quoted pullSecret.
CANARY = "canary-Qp7-pull"
PULL_SECRET = json.dumps(
    {"auths": {"quay.io": {"auth": CANARY + "-auth-value", "email": "it's \"quoted\"@example.com"}}}
)
SSH_KEY = (REPO / "modules/ocp_manifests/tests/fixtures/test-ssh-key.pub").read_text().strip()
INSTALLER_DOUBLE = REPO / "tests/fixtures/bin/openshift-install"


def cluster(out_dir, **overrides) -> dict:
    args = {
        "cluster_name": "lab",
        "base_domain": "example.com",
        "version": "4.16",
        "machine_networks": ["192.168.50.0/24"],
        "gateway": "192.168.50.1",
        "dns_servers": ["192.168.50.2"],
        "api_vips": ["192.168.50.5"],
        "ingress_vips": ["192.168.50.6"],
        "ip_pool": {"start": "192.168.50.10"},
        "nodes": [
            {"name": "master-0", "mac": "BC:24:11:00:00:01"},
            {"name": "master-1", "mac": "BC:24:11:00:00:02"},
            {"name": "master-2", "mac": "BC:24:11:00:00:03"},
        ],
        "ssh_key": SSH_KEY,
        "output_dir": str(out_dir),
    }
    args.update(overrides)
    return args


def play(args: dict) -> str:
    # The pull secret comes from a variable (as it would from Vault), passed as an extra var: on a
    # failure Ansible quotes the playbook source around the task, which must not hold the secret.
    task = {**args, "pull_secret": "{{ pull_secret }}"}
    return f"""
- hosts: localhost
  gather_facts: false
  tasks:
    - name: manifests
      proxshift.openshift.ocp_manifests: {json.dumps(task)}
"""


@pytest.fixture
def ocp(run_playbook):
    """Run the module task with these options; the pull secret is passed as an extra var."""

    def run(args: dict, **kw):
        return run_playbook(play(args), extra_vars={"pull_secret": PULL_SECRET}, **kw)

    return run


def assert_no_secret(run):
    assert CANARY not in run.output, "pull secret leaked into the output"
    for r in run.results:
        assert CANARY not in json.dumps(r), "pull secret leaked into a task result"


def test_render_then_rerun_is_unchanged(ocp, tmp_path):
    out = tmp_path / "out"
    first = ocp(cluster(out), verbosity=3)
    assert first.rc == 0, first.output
    result = first.task("manifests")
    assert result["changed"] is True
    assert result["topology"] == "compact" and result["platform"] == "baremetal"
    assert result["rendezvous_ip"] == "192.168.50.10"
    assert [n["ip"] for n in result["nodes"]] == ["192.168.50.10", "192.168.50.11", "192.168.50.12"]
    assert result["nodes"][0]["mac"] == "bc:24:11:00:00:01"
    assert_no_secret(first)

    install_config = out / "install-config.yaml"
    assert stat.S_IMODE(install_config.stat().st_mode) == 0o600
    parsed = yaml.safe_load(install_config.read_text())
    assert parsed["pullSecret"] == PULL_SECRET, "the pull secret must survive YAML quoting exactly"
    assert parsed["platform"]["baremetal"]["apiVIPs"] == ["192.168.50.5"]
    agent = yaml.safe_load((out / "agent-config.yaml").read_text())
    assert [h["role"] for h in agent["hosts"]] == ["master"] * 3

    second = ocp(cluster(out))
    assert second.rc == 0, second.output
    assert second.task("manifests")["changed"] is False
    assert sorted(p.name for p in out.iterdir()) == ["agent-config.yaml", "install-config.yaml"]


def test_check_mode_writes_nothing(ocp, tmp_path):
    out = tmp_path / "out"
    run = ocp(cluster(out), check=True, diff=True)
    assert run.rc == 0, run.output
    assert run.task("manifests")["changed"] is True
    assert not out.exists()
    assert_no_secret(run)


def test_diff_shows_the_change_with_secrets_masked(ocp, tmp_path):
    out = tmp_path / "out"
    assert ocp(cluster(out)).rc == 0
    run = ocp(cluster(out, ingress_vips=["192.168.50.7"]), diff=True)
    assert run.rc == 0, run.output
    assert run.task("manifests")["changed"] is True
    assert "-    - \"192.168.50.6\"" in run.stdout and "+    - \"192.168.50.7\"" in run.stdout, run.stdout
    assert "pullSecret: '********'" in run.stdout, run.stdout
    assert SSH_KEY.split()[1] not in run.stdout
    assert_no_secret(run)
    backups = run.task("manifests")["backups"]
    assert len(backups) == 1 and "192.168.50.6" in open(backups[0]).read()


def test_validation_failure_names_the_field_and_rule(ocp, tmp_path):
    nodes = cluster(tmp_path)["nodes"]
    nodes[2]["mac"] = "bc:24:11:00:00:01"  # same as master-0, different case
    run = ocp(cluster(tmp_path / "out", nodes=nodes, cluster_name="Lab_1"), verbosity=3)
    assert run.rc != 0
    result = run.task("manifests")
    assert run.status("manifests") == "failed"
    assert "nodes[2].mac" in result["msg"] and "mac-unique" in result["msg"], result["msg"]
    assert "cluster_name" in result["msg"] and "cluster-name-dns-subdomain" in result["msg"]
    assert {(p["path"], p["rule"]) for p in result["problems"]} == {
        ("cluster_name", "cluster-name-dns-subdomain"),
        ("nodes[2].mac", "mac-unique"),
    }
    assert not (tmp_path / "out").exists()
    assert_no_secret(run)


def test_agent_iso_with_installer_double(ocp, tmp_path):
    out = tmp_path / "out"
    sno = cluster(
        out,
        nodes=[{"name": "sno", "mac": "bc:24:11:00:00:09"}],
        api_vips=None,
        ingress_vips=None,
        # The double reports 4.19.7; the installer must be of the cluster's version.
        version="4.19",
        openshift_install=str(INSTALLER_DOUBLE),
    )
    first = ocp(sno)
    assert first.rc == 0, first.output
    r = first.task("manifests")
    assert r["topology"] == "sno" and r["platform"] == "none"
    assert r["iso_built"] is True and r["changed"] is True
    assert r["iso_path"] == str(out / "agent/agent.x86_64.iso")
    assert open(r["kubeconfig_path"]).read().count("https://api.lab.example.com:6443") == 1
    assert len(open(r["kubeadmin_password_path"]).read()) == 23

    again = ocp(sno)
    assert again.rc == 0, again.output
    r = again.task("manifests")
    assert r["changed"] is False and r["iso_built"] is False

    failing = ocp({**sno, "base_domain": "installer-fail.example.com"})
    assert failing.rc != 0
    r = failing.task("manifests")
    assert "test double failure marker" in r["msg"]
    assert any("level=fatal" in line for line in r["installer_log_tail"])
    assert_no_secret(failing)


def test_user_templates_extend_and_are_verified(ocp, tmp_path):
    builtin = (REPO / "modules/ocp_manifests/templates/agent-config.yaml.j2").read_text()
    templates = tmp_path / "templates"
    templates.mkdir()
    # The extension point: a user template adds a field the built-in one does not render.
    (templates / "agent-config.yaml.j2").write_text(
        builtin.replace("hosts:\n", "bootArtifactsBaseURL: {{ 'http://pxe.example.com/ocp' | yaml }}\nhosts:\n", 1)
    )
    out = tmp_path / "out"
    run = ocp(cluster(out, template_dir=str(templates)))
    assert run.rc == 0, run.output
    agent = yaml.safe_load((out / "agent-config.yaml").read_text())
    assert agent["bootArtifactsBaseURL"] == "http://pxe.example.com/ocp"

    # A template that drops a host is refused before anything is written.
    (templates / "agent-config.yaml.j2").write_text(builtin.replace("{% for h in hosts %}", "{% for h in hosts[:2] %}"))
    out2 = tmp_path / "out2"
    bad = ocp(cluster(out2, template_dir=str(templates)))
    assert bad.rc != 0
    assert "agent-config.yaml /hosts" in bad.task("manifests")["msg"], bad.task("manifests")["msg"]
    assert not out2.exists()


def test_custom_network_config_is_checked_by_nmstate(ocp, tmp_path):
    nodes = cluster(tmp_path)["nodes"]
    nodes[0]["ip"] = "192.168.50.10"
    nodes[0]["network_config"] = {
        "interfaces": [
            {
                "name": "ens18",
                "type": "ethernet",
                "state": "up",
                "mac-address": "BC:24:11:00:00:01",
                "ipv4": {"enabled": True, "dhcp": False, "dhcp-typo": True,
                         "address": [{"ip": "192.168.50.10", "prefix-length": 24}]},
            }
        ]
    }
    run = ocp(cluster(tmp_path / "out", nodes=nodes))
    assert run.rc != 0
    problems = run.task("manifests")["problems"]
    assert [(p["path"], p["rule"]) for p in problems] == [("nodes[0].network_config", "nmstate-gen-conf")]
    assert "dhcp-typo" in problems[0]["msg"]


def test_install_switches_render_and_are_verified(ocp, tmp_path):
    """featureSet/featureGates/cpuPartitioningMode (install-config) and minimalISO/bootArtifactsBaseURL
    (agent-config) from the module options, checked by the installer's rules and read back."""
    # 4.20: the agent installer of 4.16–4.19 refuses every non-default featureSet (checked below).
    switches = {
        "version": "4.20",
        "feature_set": "CustomNoUpgrade", "feature_gates": ["GatewayAPI=true", "NodeSwap=false"],
        "cpu_partitioning_mode": "AllNodes", "minimal_iso": True,
        "boot_artifacts_base_url": "http://10.0.0.5:8080/agent",
    }
    out = tmp_path / "out"
    run = ocp(cluster(out, **switches))
    assert run.rc == 0, run.output
    assert any("cannot be undone and prevents upgrades" in w for w in run.task("manifests").get("warnings", []))
    install = yaml.safe_load((out / "install-config.yaml").read_text())
    assert install["featureSet"] == "CustomNoUpgrade"
    assert install["featureGates"] == ["GatewayAPI=true", "NodeSwap=false"]
    assert install["cpuPartitioningMode"] == "AllNodes"
    agent = yaml.safe_load((out / "agent-config.yaml").read_text())
    assert agent["minimalISO"] is True and agent["bootArtifactsBaseURL"] == "http://10.0.0.5:8080/agent"

    # The installer's validateFeatureSet: gates only with CustomNoUpgrade; each gate <name>=<bool>.
    bad = ocp(cluster(tmp_path / "bad", feature_set="TechPreviewNoUpgrade", feature_gates=["GatewayAPI=yes"]))
    assert bad.rc != 0
    rules = {(p["path"], p["rule"]) for p in bad.task("manifests")["problems"]}
    assert ("feature_gates", "feature-gates-custom-only") in rules, rules
    assert ("feature_gates[0]", "feature-gate-format") in rules, rules
    assert not (tmp_path / "bad").exists()

    # OptionalInstallConfig.validateInstallConfig: on 4.16 the agent installer takes only the default set.
    refused = ocp(cluster(tmp_path / "refused", **{**switches, "version": "4.16"}))
    assert refused.rc != 0
    problems = refused.task("manifests")["problems"]
    assert [(p["path"], p["rule"]) for p in problems] == [("feature_set", "agent-feature-set")], problems
    assert not (tmp_path / "refused").exists()

    # A user template that drops a set option is refused: the rendered file must say what was asked.
    templates = tmp_path / "templates"
    templates.mkdir()
    builtin = (REPO / "modules/ocp_manifests/templates/install-config.yaml.j2").read_text()
    (templates / "install-config.yaml.j2").write_text(builtin.replace("featureSet:", "# featureSet:", 1))
    dropped = ocp(cluster(tmp_path / "dropped", template_dir=str(templates), **switches))
    assert dropped.rc != 0
    assert "install-config.yaml /featureSet" in dropped.task("manifests")["msg"], dropped.task("manifests")["msg"]


@pytest.mark.parametrize("version,refused", [("4.16.9", True), ("4.19.7", True), ("4.20.1", False)])
def test_installer_double_refuses_feature_sets_as_the_agent_installer(tmp_path, version, refused):
    """The double plays OptionalInstallConfig.validateInstallConfig: 4.16–4.19 refuse any featureSet but
    Default, printing the installer's NotSupported error; 4.20 dropped the rule."""
    import os
    import subprocess

    (tmp_path / "install-config.yaml").write_text(
        "apiVersion: v1\nmetadata:\n  name: lab\nfeatureSet: TechPreviewNoUpgrade\n"
        "controlPlane:\n  name: master\n  replicas: 1\ncompute:\n- name: worker\n  replicas: 0\n")
    (tmp_path / "agent-config.yaml").write_text("apiVersion: v1beta1\nhosts: []\n")
    env = {**os.environ, "PROXSHIFT_TEST_INSTALLER_VERSION": version}
    run = subprocess.run([str(INSTALLER_DOUBLE), "agent", "create", "image", "--dir", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=60)
    message = ('invalid install-config configuration: FeatureSet: Unsupported value: '
               '"TechPreviewNoUpgrade": supported values: ""')
    assert (message in run.stderr) == refused, run.stderr
    if refused:
        assert run.returncode != 0
