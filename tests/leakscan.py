"""Secret-leak scan for the whole test session (a pytest plugin, loaded by tests/conftest.py).

Canaries are fake secret values the tests feed to the modules. They are discovered automatically — every
module-level constant of a test module, conftest or test helper whose NAME contains ``CANARY`` (a string,
or a dict/list of strings) or whose string VALUE contains ``canary`` — and can be added at run time with
the ``canary`` fixture (``canary("value")``). A JSON canary also registers its string leaves (the ``auth``
inside a pull secret), since that is the part that would leak.

Scanned: every ``ansible-playbook`` run's stdout, stderr and recorded task results (every task's whole
result, ``invocation`` included, as AWX stores it from its callback whatever the verbosity; lookup plugins run
inside these), every ``ansible-inventory`` run's stdout and stderr (``run_inventory``: the inventory
plugin's host vars, warnings, errors and ``-vvv`` output) (what any callback,
AWX included, receives: ansible censors ``no_log`` results before callbacks see them, so a ``no_log`` task
that returns a secret by design passes only if its displayed result is censored), each test's captured
stdout/stderr/log, and at session end every ``*.log`` and ``record-*.jsonl`` artifact under the session's
temporary directory (our own services' logs included; third-party dev servers that print their own
credentials by design, OpenBao and the kube test environment, are not ours to scan, nor is the installer's own
``.openshift_install.log``) and every async job file (``ansible-async/``, where async tasks leave their whole
result on disk).

Every canary is matched in each form a secret takes when it is quoted or encoded: raw, JSON-escaped (once and
twice, ``\\u`` and ``\\/`` escapes), URL-encoded (``quote`` and form style, either hex case), base64 (standard and
URL-safe, at each of the three alignments it can have inside a longer encoded text: the characters that depend
on the canary alone) and, for a PEM block (given as is or base64-encoded, as a kubeconfig's ``client-key-data``),
each line of its body, so a key split over lines or escaped into one is found too.

A test whose own runs leak fails at teardown, naming the canary and where it appeared. A test that shows
a canary on purpose (the control proving the scan works) is marked ``@pytest.mark.canary_shown``.
"""
from __future__ import annotations

import base64
import binascii
import json
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import pytest

from testlib import string_leaves

# Third-party servers' own logs (they print their dev root token / admin credentials by design), and the
# installer's own log in its folder, which holds the kubeadmin password as auth/kubeadmin-password does
# (the real installer writes its "Login to the console" line there too; no task result carries it).
NOT_OURS = {"bao.log", "testenv.log", ".openshift_install.log"}
# Folders whose every file is scanned: Ansible's async job files (ANSIBLE_ASYNC_DIR, testlib.ansible_env),
# which keep an async task's whole result on disk.
SCANNED_DIRS = {"ansible-async"}
MIN_LEN = 8  # shorter values would match by accident


def _json_forms(value: str) -> set[str]:
    once = json.dumps(value, ensure_ascii=False)[1:-1]
    ascii_ = json.dumps(value)[1:-1]
    return {once, ascii_, once.replace("/", "\\/"), ascii_.replace("/", "\\/"), json.dumps(once)[1:-1]}


def _url_forms(value: str) -> set[str]:
    def lower(encoded: str) -> str:
        return "".join(c.lower() if i >= 1 and encoded[i - 1] == "%" or i >= 2 and encoded[i - 2] == "%" else c
                       for i, c in enumerate(encoded))
    forms = {urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value, safe="")}
    return forms | {lower(f) for f in forms}


def _base64_forms(value: str) -> set[str]:
    """The characters of the base64 of `value` that depend on its bytes alone, at each alignment."""
    data = value.encode()
    forms = set()
    for k in range(3):
        start, end = -(-8 * k // 6), 8 * (k + len(data)) // 6
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            forms.add(encode(b"\0" * k + data).decode()[start:end])
    return forms


def _pem_lines(value: str) -> set[str]:
    """The body lines of a PEM block in `value` (as is, or base64-encoded), each a canary of its own."""
    text = value
    if "-----BEGIN" not in text:
        try:
            text = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return set()
    if "-----BEGIN" not in text:
        return set()
    return {line.strip() for line in text.splitlines()
            if len(line.strip()) >= 16 and not line.startswith("-----")}


def encoded_forms(value: str) -> dict[str, str]:
    """Each form `value` can leak in, with what form it is (the raw value: "")."""
    forms: dict[str, str] = {}
    for kind, found in (("PEM line", _pem_lines(value)), ("base64", _base64_forms(value)),
                        ("URL-encoded", _url_forms(value)), ("JSON-escaped", _json_forms(value))):
        for form in found:
            if len(form) >= MIN_LEN:
                forms[form] = kind
    forms.pop(value, None)
    return {value: "", **forms}


@dataclass
class Finding:
    canary: str
    origin: str
    where: str
    test: str

    def __str__(self):
        shown = self.canary if len(self.canary) <= 24 else self.canary[:21] + "..."
        return f"{self.test or '<session>'}: canary {shown!r} ({self.origin}) appeared in {self.where}"


class LeakScan:
    def __init__(self):
        self.canaries: dict[str, str] = {}
        # Every form a canary is matched in: form -> (canary, origin, kind of form).
        self.forms: dict[str, tuple[str, str, str]] = {}
        self.findings: list[Finding] = []
        self.current: pytest.Item | None = None
        self.scanned: set[str] = set()
        # Temporary directories of tests marked canary_shown: their artifacts show a canary on purpose.
        self.exempt_dirs: list[Path] = []

    def register(self, value, origin: str):
        if isinstance(value, dict):
            for v in value.values():
                self.register(v, origin)
            return
        if isinstance(value, (list, tuple, set, frozenset)):
            for v in value:
                self.register(v, origin)
            return
        if not isinstance(value, str) or len(value) < MIN_LEN:
            return
        if value not in self.canaries:
            self.canaries[value] = origin
            for form, kind in encoded_forms(value).items():
                self.forms.setdefault(form, (value, origin, kind))
        try:
            parsed = json.loads(value)
        except ValueError:
            return
        if isinstance(parsed, (dict, list)):
            for leaf in string_leaves(parsed):
                if len(leaf) >= 12:
                    self.register(leaf, origin + " (inside)")

    def discover(self, module):
        """Register the canary constants of a (test or helper) module."""
        name = getattr(module, "__name__", "?")
        for attr, value in list(vars(module).items()):
            if attr.startswith("__"):
                continue
            if "CANARY" in attr.upper():
                self.register(value, f"{name}.{attr}")
            elif isinstance(value, str) and "canary" in value.lower():
                self.register(value, f"{name}.{attr}")

    def shown_on_purpose(self) -> bool:
        return bool(self.current and self.current.get_closest_marker("canary_shown"))

    def scan(self, text: str, where: str, test: str | None = None):
        if not text or self.shown_on_purpose():
            return
        test = test if test is not None else (self.current.nodeid if self.current else "")
        seen = set()
        for form, (value, origin, kind) in self.forms.items():
            if value not in seen and form in text:
                seen.add(value)
                self.findings.append(Finding(value, f"{origin}, {kind}" if kind else origin, where, test))

    def scan_file(self, path: Path):
        key = str(path)
        if key in self.scanned or any(path.is_relative_to(d) for d in self.exempt_dirs):
            return
        self.scanned.add(key)
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return
        self.scan(text, str(path), test="")


SCAN = LeakScan()


def recording(cls):
    """A subclass of testlib.PlaybookRun that scans every run's output as it is created."""

    class Recorded(cls):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            SCAN.scan(self.stdout, "ansible-playbook stdout")
            SCAN.scan(self.stderr, "ansible-playbook stderr")
            SCAN.scan(json.dumps(self.results, default=str), "recorded task results")

    Recorded.__name__ = cls.__name__
    Recorded.__qualname__ = cls.__qualname__
    return Recorded


def scan_command(tool: str, stdout: str, stderr: str):
    """Scan the output of one run of an Ansible command other than ansible-playbook."""
    SCAN.scan(stdout, f"{tool} stdout")
    SCAN.scan(stderr, f"{tool} stderr")


# --------------------------------------------------------------------------------------------- hooks

def pytest_configure(config):
    config.addinivalue_line("markers", "canary_shown: the test shows a canary secret on purpose (leak-scan control)")


def pytest_collection_finish(session):
    # Test modules, conftests and helpers are all imported by now.
    tests_dir = str(Path(__file__).resolve().parent)
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None) or ""
        if f.startswith(tests_dir):
            SCAN.discover(mod)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    SCAN.current = item
    try:
        return (yield)
    finally:
        SCAN.current = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    if item.get_closest_marker("canary_shown") and "tmp_path" in getattr(item, "funcargs", {}):
        SCAN.exempt_dirs.append(Path(item.funcargs["tmp_path"]))
    result = yield
    mine = [f for f in SCAN.findings if f.test == item.nodeid and not getattr(f, "reported", False)]
    for f in mine:
        f.reported = True
    if mine:
        pytest.fail("secret leak:\n" + "\n".join(map(str, mine)), pytrace=False)
    return result


def pytest_runtest_logreport(report):
    if report.when != "call" or SCAN.shown_on_purpose():
        return
    for title, content in report.sections:
        SCAN.scan(content, f"pytest {title}", test=report.nodeid)


@pytest.fixture
def canary():
    """Register extra canary values for the rest of the session: ``canary("s3cret-value")``."""

    def add(value, origin: str = "canary fixture"):
        SCAN.register(value, origin)
        return value

    return add


def _scan_artifacts(session) -> Path | None:
    """Scan this process's session artifacts; returns its base temporary directory (None if none)."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return None
    try:
        base = factory.getbasetemp()
    except Exception:  # no test used a tmp dir
        return None
    if base.exists():
        for path in sorted(base.rglob("*")):
            if path.is_file() and is_artifact(path):
                SCAN.scan_file(path)
    return base


def is_artifact(path: Path) -> bool:
    """Whether the session-end scan reads this file: our logs, the recorded results, async job files."""
    if path.name in NOT_OURS:
        return False
    return (path.suffix == ".log" or path.parent.name in SCANNED_DIRS
            or (path.name.startswith("record-") and path.suffix == ".jsonl"))


# Under pytest-xdist every worker scans its own tests and artifacts (the canaries live in the processes that
# imported the test modules) and hands what no test reported to the controller through this file in its own
# base temporary directory, which xdist places inside the controller's; the controller fails the session.
LATE_FINDINGS = "leak-findings.txt"


def pytest_sessionfinish(session, exitstatus):
    base = _scan_artifacts(session)
    late = [str(f) for f in SCAN.findings if not getattr(f, "reported", False)]
    if hasattr(session.config, "workerinput"):
        if late and base is not None:
            (base / LATE_FINDINGS).write_text("\n".join(late) + "\n")
    elif base is not None:
        for handed in sorted(base.glob(f"*/{LATE_FINDINGS}")):
            late += handed.read_text().splitlines()
    if late:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = ["secret-leak scan: canary values appeared where they must not:"] + [f"  {f}" for f in late]
        if tr:
            tr.write_line("\n".join(lines), red=True)
        else:
            print("\n".join(lines), file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
