"""Each ProxShift AWX credential type, injected as AWX injects it, reaches every consumer: the kv lookup, a
module and the inventory plugin (whose templated options read the lookup). The injectors of
`awx/credential_types/*.yml` are rendered the way AWX renders them (Jinja2 sandbox; a text input left empty is
absent, so undefined, a box left unticked false; a `file` template written to a file named by `tower.filename`), and the job gets
exactly that environment and those extra vars; an inventory update gets the environment only (AWX hands
inventory sources no extra vars)."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jinja2.sandbox
import pytest
import yaml

from services import running_openbao, running_pvesim
from testlib import REPO

CREDENTIAL_TYPES = REPO / "awx" / "credential_types"
APPROLE_SECRET_ID_CANARY = "awx-approle-secret-id-canary-5d1e"
READER_POLICY = ('path "secret/data/*" { capabilities = ["read"] }\n'
                 'path "sys/internal/ui/mounts/*" { capabilities = ["read"] }')


def inject(type_file: str, inputs: dict, tmp: Path) -> tuple[dict, dict]:
    """(environment, extra vars) that AWX gives a job for a credential of this type with these inputs."""
    cred_type = yaml.safe_load((CREDENTIAL_TYPES / type_file).read_text())
    jinja = jinja2.sandbox.ImmutableSandboxedEnvironment()
    # As AWX's inject_credential: the inputs given, and an unticked box as false; a text input left empty is
    # not in the namespace at all.
    namespace = {f["id"]: False for f in cred_type["inputs"]["fields"] if f.get("type") == "boolean"}
    namespace.update(inputs)
    injectors = cred_type["injectors"]
    files = {}
    for key, template in injectors.get("file", {}).items():
        name = key.split(".", 1)[1]
        path = tmp / f"awx_{name}"
        path.write_text(jinja.from_string(template).render(**namespace))
        files[name] = str(path)
    namespace["tower"] = {"filename": files}

    def render(section: str) -> dict:
        return {k: jinja.from_string(str(v)).render(**namespace) for k, v in injectors.get(section, {}).items()}

    return render("env"), render("extra_vars")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """pvesim with an API token, and OpenBao holding that token's secret and an AppRole that reads it."""
    from leakscan import SCAN

    with running_pvesim(tmp_path_factory.mktemp("pvesim")) as sim, \
            running_openbao(tmp_path_factory.mktemp("bao")) as bao:
        token = sim.api("POST", "access/users/root@pam/token/awx", form={"privsep": "0"})
        SCAN.register(token["value"], "pvesim token secret")
        bao.kv_put("proxmox/inventory", {"secret": token["value"]})
        bao.role_id = bao.approle("awx", READER_POLICY, APPROLE_SECRET_ID_CANARY)
        yield sim, bao, token


def vault_credential(kind: str, bao, tmp: Path) -> tuple[dict, dict]:
    if kind == "token, no CA":
        return inject("vault.yml", {"url": bao.addr, "token": bao.token}, tmp)
    return inject("vault_approle.yml", {"url": bao.addr, "role_id": bao.role_id,
                                        "secret_id": APPROLE_SECRET_ID_CANARY}, tmp)


@pytest.mark.parametrize("kind", ["token, no CA", "AppRole"])
def test_vault_credential_reaches_the_lookup_a_module_and_the_inventory(kind, lab, tmp_path, run_playbook,
                                                                        run_inventory):
    sim, bao, token = lab
    env, extra_vars = vault_credential(kind, bao, tmp_path)
    if kind == "token, no CA":
        assert env["VAULT_CACERT"] == "", env  # what the issue saw: the empty CA must count as unset
        assert env["VAULT_NAMESPACE"] == "", env  # not Jinja's namespace() (an absent input is undefined)
    run = run_playbook(textwrap.dedent("""\
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: lookup
              ansible.builtin.assert:
                that: lookup('proxshift.hashi_vault.kv', 'proxmox/inventory', key='secret') | length == 36
            - name: module
              proxshift.hashi_vault.hashicorp_vault_info:
                path: proxmox/inventory
              register: read
              no_log: true
            - name: found
              ansible.builtin.assert:
                that: read.found
        """), env=env, extra_vars=extra_vars)
    assert run.rc == 0, run.output
    # The inventory update: the environment only, the token secret read from Vault by the lookup.
    source = tmp_path / "proxmox.yml"
    source.write_text(textwrap.dedent(f"""\
        plugin: proxshift.proxmox.proxmox
        url: {sim.url}
        token_id: "{token['full-tokenid']}"
        token_secret: "{{{{ lookup('proxshift.hashi_vault.kv', 'proxmox/inventory', key='secret') }}}}"
        ca_path: {sim.ca_path}
        want_agent_interfaces: false
        """))
    proc = run_inventory(source, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["_meta"]["hostvars"], proc.stdout


@pytest.mark.parametrize("ca_given", [True, False], ids=["CA given", "no CA, TLS check off"])
def test_proxmox_credential_reaches_the_inventory_and_a_module(ca_given, lab, tmp_path, run_playbook,
                                                               run_inventory):
    sim, _, token = lab
    inputs = {"host": sim.url, "user": "root@pam", "token_id": "awx", "token_secret": token["value"]}
    if ca_given:
        inputs["ca"] = Path(sim.ca_path).read_text()
    else:
        inputs["skip_tls_verify"] = True
    env, extra_vars = inject("proxmox_api_token.yml", inputs, tmp_path)
    assert bool(env["PROXMOX_CA_PATH"]) is ca_given, env
    assert not extra_vars
    source = tmp_path / "proxmox.yml"
    source.write_text("plugin: proxshift.proxmox.proxmox\nwant_agent_interfaces: false\n")
    proc = run_inventory(source, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    hosts = json.loads(proc.stdout)["_meta"]["hostvars"]
    assert hosts, proc.stdout
    run = run_playbook(textwrap.dedent("""\
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: module
              proxshift.proxmox.proxmox_vm_info:
                config: false
        """), env=env)
    assert run.rc == 0, run.output
    assert len(run.task("module")["vms"]) == len(hosts), run.task("module")
