"""Longest files first: the suite's two xdist workers take whole files (`--dist loadfile`), so a long flow
file started last keeps one worker busy while the other idles. Files are ordered by the seconds each took
in a measured run (`tests/durations.json`, longest first; a file not listed there counts as
`UNKNOWN_SECONDS`), the classic longest-processing-time-first rule, and the Makefile passes
`--no-loadscope-reorder` so xdist keeps that order instead of its own (by number of tests).

Every run writes what it measured to `build/test-durations.json` (controller only, summed over setup,
call and teardown of each test); copy it over `tests/durations.json` after adding or removing slow files.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from testlib import REPO

MEASURED = Path(__file__).with_name("durations.json")
WRITTEN = REPO / "build" / "test-durations.json"
UNKNOWN_SECONDS = 60.0


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def known_durations() -> dict[str, float]:
    try:
        return {k: float(v) for k, v in json.loads(MEASURED.read_text()).items()}
    except FileNotFoundError:
        return {}


def longest_first(nodeids: list[str], seconds: dict[str, float]) -> list[int]:
    """Indexes of `nodeids` with files by descending seconds; a file's tests keep their order (pure)."""
    first_seen: dict[str, int] = {}
    for i, n in enumerate(nodeids):
        first_seen.setdefault(file_of(n), i)
    rank = sorted(first_seen, key=lambda f: (-seconds.get(f, UNKNOWN_SECONDS), first_seen[f]))
    position = {f: r for r, f in enumerate(rank)}
    return sorted(range(len(nodeids)), key=lambda i: (position[file_of(nodeids[i])], i))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    order = longest_first([i.nodeid for i in items], known_durations())
    items[:] = [items[i] for i in order]


class Recorder:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[file_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session) -> None:
        if not self.seconds:
            return
        WRITTEN.parent.mkdir(parents=True, exist_ok=True)
        ranked = dict(sorted(((f, round(s, 1)) for f, s in self.seconds.items()), key=lambda kv: -kv[1]))
        WRITTEN.write_text(json.dumps(ranked, indent=1) + "\n")


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller sees every worker's reports
        config.pluginmanager.register(Recorder(), "proxshift-file-durations")
