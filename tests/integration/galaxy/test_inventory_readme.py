"""inventory/README.md's table of files names only what is there (issue #36: it once named a `demo/`
folder that lives beside inventory/, not in it): every path in its first column exists relative to
inventory/."""
from __future__ import annotations

import re

from testlib import REPO


def test_every_file_the_inventory_readme_lists_exists():
    inventory = REPO / "inventory"
    text = (inventory / "README.md").read_text()
    table = text.split("| File | What it holds |", 1)[1].split("\n\n", 1)[0]
    paths = re.findall(r"^\| `([^`]+)` \|", table, re.M)
    assert len(paths) >= 5, table
    missing = [p for p in paths if not (inventory / p).exists()]
    assert missing == [], f"inventory/README.md lists {missing}, which inventory/ does not hold"
