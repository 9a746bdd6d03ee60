"""Every module of an action group accepts every option a group default may set (issue #19 item 5): a
`module_defaults` entry for `group/...` is passed to each module of the group, and our modules reject
options they do not know, so a group holding a module without the group's options breaks that module."""
from __future__ import annotations

import re

import yaml

from testlib import REPO

COLLECTIONS = REPO / "ansible_collections" / "proxshift"
CONNECTIONS = REPO / "playbooks" / "vars" / "connections.yml"
# The options each group is for: the playbooks' connection settings (vars/connections.yml) and the hub
# connection of the ACM modules (kube-client `connect::hub_opts`).
HUB_OPTIONS = {"hub_kubeconfig", "hub_context", "hub_host", "hub_api_key", "hub_ca_cert", "hub_validate_certs"}


def connection_keys(var: str) -> set[str]:
    text = yaml.safe_load(CONNECTIONS.read_text())[var]
    return set(re.findall(r"'(\w+)':", text))


def group_options() -> dict[tuple[str, str], set[str]]:
    return {
        ("proxmox", "proxmox"): connection_keys("proxshift_proxmox_connection"),
        ("hashi_vault", "vault"): connection_keys("proxshift_vault_connection"),
        ("openshift", "openshift"): HUB_OPTIONS,
    }


def documentation(path) -> dict:
    return yaml.safe_load(path.read_text().split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])


def module_options(collection: str, module: str) -> set[str]:
    """The options a module's documentation names, with those of the fragments it extends
    (`proxshift.<collection>.<fragment>` is that collection's plugins/doc_fragments/<fragment>.py)."""
    doc = documentation(COLLECTIONS / collection / "plugins" / "modules" / f"{module}.py")
    opts = dict(doc["options"])
    for fragment in doc.get("extends_documentation_fragment", []):
        _, owner, name = fragment.split(".")
        for key, value in documentation(COLLECTIONS / owner / "plugins" / "doc_fragments" / f"{name}.py")["options"].items():
            opts.setdefault(key, value)  # the module's own documentation wins, as in ansible-doc
    return set(opts) | {a for o in opts.values() for a in o.get("aliases", [])}


def action_groups() -> dict[tuple[str, str], list[str]]:
    groups = {}
    for runtime in sorted(COLLECTIONS.glob("*/meta/runtime.yml")):
        collection = runtime.parent.parent.name
        for name, modules in (yaml.safe_load(runtime.read_text()).get("action_groups") or {}).items():
            groups[(collection, name)] = modules
    return groups


def test_every_module_of_a_group_accepts_the_group_options():
    wanted, groups = group_options(), action_groups()
    assert set(groups) == set(wanted), "a group without declared options (or an option set without a group)"
    problems = []
    for key, modules in groups.items():
        assert wanted[key], key
        for module in modules:
            missing = wanted[key] - module_options(key[0], module)
            if missing:
                problems.append(f"group/proxshift.{key[0]}.{key[1]}: {module} does not accept {sorted(missing)}")
    assert not problems, "\n".join(problems)


def test_group_defaults_in_the_playbooks_are_group_options():
    """What the playbooks put under `group/...` (the connection dicts) is what the check above covers."""
    used = {}
    for pb in (REPO / "playbooks").glob("*.yaml"):
        for play in yaml.safe_load(pb.read_text()) or []:
            for group, value in (play.get("module_defaults") or {}).items():
                used.setdefault(group, set()).add(str(value))
    wanted = group_options()
    for group, values in used.items():
        _, fqcn = group.split("/", 1)
        _, collection, name = fqcn.split(".")
        for value in values:
            var = re.fullmatch(r"\{\{\s*(\w+)\s*\}\}", value)
            assert var, f"{group}: {value} (only the connection dicts of vars/connections.yml are checked)"
            if var.group(1) in ("proxshift_proxmox_connection", "proxshift_vault_connection"):
                assert connection_keys(var.group(1)) == wanted[(collection, name)]
