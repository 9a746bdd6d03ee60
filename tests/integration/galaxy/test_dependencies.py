"""Every collection declares the collections it uses: each FQCN its roles and plugins call (a task's module or
action, a lookup, a `module_defaults` group, a role it imports) outside its own namespace.name is in its
galaxy.yml `dependencies`; and a tarball installed with only its declared dependencies, into an empty path,
resolves every module its roles name."""
from __future__ import annotations

import re
import subprocess
import textwrap

import yaml

from testlib import COLLECTION_NAMES, REPO, ansible_env, string_leaves, tool

COLLECTIONS = REPO / "ansible_collections" / "proxshift"
FQCN = r"([a-z0-9_]+)\.([a-z0-9_]+)\.[a-z0-9_]+"
LOOKUP = re.compile(r"""\b(?:lookup|query|q)\(\s*['"]""" + FQCN)
ROLE_KEYS = ("include_role", "import_role", "ansible.builtin.include_role", "ansible.builtin.import_role")
TASK_LISTS = ("block", "rescue", "always")
# Ansible itself, always there.
BUILTIN = {"ansible.builtin", "ansible.legacy"}
DOC_BLOCK = re.compile(r'^(DOCUMENTATION|EXAMPLES|RETURN) = r?""".*?"""', re.S | re.M)
PY_IMPORT = re.compile(r"ansible_collections\.([a-z0-9_]+)\.([a-z0-9_]+)\.")


def _collection_of(name: str) -> str | None:
    match = re.fullmatch(FQCN, name)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _task_uses(task: dict) -> set[str]:
    """Collections one task (and the tasks nested in it) names."""
    used = set()
    for key, value in task.items():
        if key in TASK_LISTS and isinstance(value, list):
            used |= _tasks_uses(value)
        elif key == "module_defaults" and isinstance(value, dict):
            used |= {c for k in value if (c := _collection_of(k.removeprefix("group/")))}
        elif key in ROLE_KEYS and isinstance(value, dict):
            used |= {c for c in [_collection_of(str(value.get("name", "")))] if c}
        elif (c := _collection_of(key)):
            used.add(c)
    return used | {c for text in string_leaves(task) for c in _lookups(text)}


def _lookups(text: str) -> set[str]:
    return {f"{m.group(1)}.{m.group(2)}" for m in LOOKUP.finditer(text)}


def _tasks_uses(tasks) -> set[str]:
    used = set()
    for task in tasks or []:
        if isinstance(task, dict):
            used |= _task_uses(task)
    return used


def collections_used(root) -> dict[str, set[str]]:
    """{collection: files naming it} for every role task file, role meta and plugin of one collection."""
    found: dict[str, set[str]] = {}

    def note(colls, path):
        for coll in colls:
            found.setdefault(coll, set()).add(str(path.relative_to(root)))

    for path in sorted(root.glob("roles/*/*/*.yml")) + sorted(root.glob("roles/*/*/*.yaml")):
        data = yaml.safe_load(path.read_text())
        if path.parent.name in ("tasks", "handlers"):
            note(_tasks_uses(data), path)
        elif path.parent.name == "meta" and path.name.startswith("main") and isinstance(data, dict):
            deps = [d.get("role", d.get("name", "")) if isinstance(d, dict) else d for d in data.get("dependencies") or []]
            note({c for d in deps if (c := _collection_of(str(d)))}, path)
        else:  # defaults, vars: lookups only
            note(_lookups(path.read_text()), path)
    for path in sorted(root.glob("roles/*/templates/**/*")) + sorted(root.glob("playbooks/**/*.y*ml")):
        if path.is_file():
            note(_lookups(path.read_text()), path)
    for path in sorted(root.glob("plugins/**/*.py")):
        code = DOC_BLOCK.sub("", path.read_text())  # the docs' examples mention other collections, code does not
        note({f"{m.group(1)}.{m.group(2)}" for m in PY_IMPORT.finditer(code)}, path)
        note(_lookups(code), path)
    return found


def galaxy(coll: str) -> dict:
    return yaml.safe_load((COLLECTIONS / coll / "galaxy.yml").read_text())


def test_every_collection_a_collection_uses_is_a_declared_dependency():
    problems = []
    for coll in COLLECTION_NAMES:
        declared = set(galaxy(coll).get("dependencies") or {})
        for used, files in sorted(collections_used(COLLECTIONS / coll).items()):
            if used not in BUILTIN and used != f"proxshift.{coll}" and used not in declared:
                problems.append(f"proxshift.{coll} uses {used} ({', '.join(sorted(files))}) "
                                f"but its galaxy.yml dependencies are {sorted(declared)}")
    assert not problems, "\n".join(problems)


def test_the_scan_sees_the_uses_that_need_a_dependency():
    """The scanner itself: openshift's roles call proxshift.hashi_vault modules (acm, gitops, external_secrets)."""
    used = collections_used(COLLECTIONS / "openshift")
    assert {"roles/acm/tasks/main.yml", "roles/external_secrets/tasks/vault.yml",
            "roles/gitops/tasks/credentials.yml"} <= used["proxshift.hashi_vault"], used
    assert _task_uses({"block": [{"x.y.z": {}}], "module_defaults": {"group/a.b.c": {}},
                       "debug": {"msg": "{{ lookup('p.q.r', 'k') }}"}}) == {"x.y", "a.b", "p.q"}


def test_each_tarball_with_only_its_declared_dependencies_resolves_its_roles(built_tarballs, tmp_path):
    for coll in COLLECTION_NAMES:
        deps = [d.split(".", 1)[1] for d in galaxy(coll).get("dependencies") or {}]
        dest = tmp_path / coll
        env = ansible_env(dest, {"ANSIBLE_COLLECTIONS_PATH": str(dest)})
        tarballs = [str(built_tarballs[c]) for c in [coll, *deps]]
        proc = subprocess.run([tool("ansible-galaxy"), "collection", "install", "--offline", "-p", str(dest), *tarballs],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        roles = sorted(p.name for p in (COLLECTIONS / coll / "roles").iterdir() if (p / "tasks").is_dir())
        play = tmp_path / f"{coll}.yml"
        play.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n" + "".join(textwrap.indent(
            f"- ansible.builtin.import_role:\n    name: proxshift.{coll}.{role}\n", "    ") for role in roles))
        proc = subprocess.run([tool("ansible-playbook"), "--syntax-check", str(play)], env=env, cwd=str(tmp_path),
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"proxshift.{coll} with {deps}:\n{proc.stdout}{proc.stderr}"
