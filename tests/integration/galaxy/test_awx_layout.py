"""The layout that lets a bare checkout (an AWX project sync) and the installed collections live side by
side: every module runs through its collection's action shim, the shims share one implementation, and
ansible.cfg keeps the unbuilt checkout behind the installed collections."""
from __future__ import annotations

import configparser
import os

from testlib import COLLECTION_NAMES, REPO

COLLECTIONS = REPO / "ansible_collections" / "proxshift"


def test_every_module_has_its_action_shim():
    for coll in COLLECTION_NAMES:
        plugins = COLLECTIONS / coll / "plugins"
        modules = sorted(p.stem for p in (plugins / "modules").glob("*.py"))
        shims = sorted(p.stem for p in (plugins / "action").glob("*.py"))
        assert modules and shims == modules, (coll, modules, shims)
        for name in shims:
            text = (plugins / "action" / f"{name}.py").read_text()
            assert f"ansible_collections.proxshift.{coll}.plugins.plugin_utils.binary_module import" in text, name


def test_the_shared_action_has_one_source_that_every_collection_links_to():
    source = REPO / "modules/collection-binaries/python/binary_module.py"
    for coll in COLLECTION_NAMES:
        link = COLLECTIONS / coll / "plugins/plugin_utils/binary_module.py"
        assert link.is_symlink(), f"{link} is a copy: link it to {source}"
        # Relative, so a clone anywhere (an AWX project sync) resolves it.
        assert not os.path.isabs(os.readlink(link)) and link.resolve() == source.resolve(), os.readlink(link)


def test_ansible_cfg_puts_the_built_checkout_first_and_the_bare_one_last():
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "ansible.cfg")
    paths = cfg["defaults"]["collections_path"].split(":")
    assert paths[0] == "build/collections", paths
    assert paths[-1] == ".", paths
    assert "/usr/share/ansible/collections" in paths and "~/.ansible/collections" in paths, paths
