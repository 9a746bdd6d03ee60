"""The suite's own scheduling rule (tests/file_durations.py): files longest first, tests kept in order."""
from file_durations import UNKNOWN_SECONDS, longest_first


def test_files_go_longest_first_and_keep_their_tests_in_order():
    ids = ["a.py::t1", "b.py::t1", "a.py::t2", "c.py::t1", "b.py::t2"]
    order = longest_first(ids, {"a.py": 5.0, "b.py": 300.0, "c.py": 20.0})
    assert [ids[i] for i in order] == ["b.py::t1", "b.py::t2", "c.py::t1", "a.py::t1", "a.py::t2"]


def test_an_unmeasured_file_counts_as_unknown_seconds_and_ties_keep_collection_order():
    ids = ["new.py::t", "short.py::t", "long.py::t", "other_new.py::t"]
    seconds = {"short.py": UNKNOWN_SECONDS - 1, "long.py": UNKNOWN_SECONDS + 1}
    order = longest_first(ids, seconds)
    assert [ids[i] for i in order] == ["long.py::t", "new.py::t", "other_new.py::t", "short.py::t"]
