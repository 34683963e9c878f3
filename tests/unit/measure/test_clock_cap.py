"""stderr kept to its cap (timing.stderr_cap_bytes): the first half as it came, the last lines
up to the other half, and between them a line that says what was left out."""

from __future__ import annotations

from kit.measure import clock
from kit.measure.stamped import read_stamped


def _write(path, items, cap):
    with open(path, "wb") as f:
        w = clock._Writer(f, cap)
        w.start()
        for item in items:
            w.queue.put(item)
        w.queue.put(None)
        w.join()
    assert w.error is None


def test_a_stderr_past_its_cap_keeps_its_head_and_tail_and_marks_the_cut(tmp_path):
    items = [b"%d line %05d %s\n" % (1000 + k, k, b"x" * 80) for k in range(2000)]
    seen = sum(map(len, items))
    log = tmp_path / "stderr.log"
    _write(log, items, cap=1 << 16)
    data = log.read_bytes()
    assert len(data) <= (1 << 16) + 200  # the cap, and the marker's line
    lines = [x.text for x in read_stamped(log)]  # still a stamped log, line by line
    assert lines[0].startswith("line 00000") and lines[-1].startswith("line 01999")
    (marker,) = [x for x in lines if x.startswith("[micakit: stderr cut:")]
    cut = clock.stderr_cut(log)
    assert cut is not None and cut["seen_bytes"] == seen
    assert cut["kept_bytes"] == len(data) - len(marker) - len(b"0000 \n")
    assert f"{seen - cut['kept_bytes']} bytes left out here" in marker
    stamps = [x.stamp_ns for x in read_stamped(log)]
    assert stamps == sorted(stamps)  # the marker stands where the cut is, in stamp order


def test_a_stderr_within_its_cap_is_kept_whole(tmp_path):
    items = [b"%d line %d\n" % (1000 + k, k) for k in range(100)]
    log = tmp_path / "stderr.log"
    _write(log, items, cap=1 << 16)
    assert log.read_bytes() == b"".join(items)
    assert clock.stderr_cut(log) is None
