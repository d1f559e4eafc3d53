"""The run's journal: frames that survive a kill at any byte, and a replay that
equals the data the final save writes."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from reportdata import request

from slogate.analysis.documents.frames import frame, read_frames
from slogate.analysis.documents.journal import (
    JOURNAL_FILE,
    KILLED_REASON,
    JournalWriter,
    replay,
)
from slogate.analysis.documents.rundata import DATA_DIR, RunData
from slogate.analysis.documents.summary import redact
from slogate.analysis.measurement.recorder import OVERALL, Recorder
from slogate.analysis.measurement.records import ErrorKind
from slogate.analysis.measurement.timeseries import window_row

META = {"run_id": "r", "complete": False, "incomplete_reason": None, "measured_s": 0.0}


def record_second(recorder: Recorder, second: int, rng: random.Random) -> None:
    """A second of a 128-stream run: ok requests of varied lengths, a failure."""
    for i in range(128):
        wall = second + i / 128
        if i == 0:
            failed = request(ttft_ms=10)
            failed.error, failed.error_message = ErrorKind.TIMEOUT_STALL, f"stall {second}"
            recorder.record(failed, wall, stage="ramp")
            continue
        done = request(
            ttft_ms=rng.uniform(20, 900), itl_ms=rng.uniform(2, 60), tokens=rng.randint(1, 300)
        )
        recorder.record(done, wall, stage="ramp" if second < 3 else "steady", warmup=second < 1)


def close_windows(recorder: Recorder, rows: list[dict], before: int) -> None:
    for (scenario, index), bucket in sorted(recorder.pop_windows(before).items()):
        rows.append(window_row(scenario, index, recorder.window_s, bucket, {"users": 256}))


def counts_of(histogram: HdrHistogram) -> np.ndarray:
    return np.ctypeslib.as_array(histogram.counts)


def assert_same_data(replayed: RunData, expected: RunData) -> None:
    assert replayed.meta == expected.meta
    assert replayed.timeseries == expected.timeseries
    assert sorted(replayed.buckets) == sorted(expected.buckets)
    for key, bucket in expected.buckets.items():
        mine = replayed.buckets[key]
        assert mine.counters.to_dict() == bucket.counters.to_dict(), key
        assert mine.histograms.encode() == bucket.histograms.encode(), key
        for name, histogram in bucket.histograms:
            # every bucket's count and the total the same: then every percentile
            # is (hdrh's percentile walk, 5 ms a call, is what this test spent)
            theirs = mine.histograms.histogram(name)
            assert theirs.get_total_count() == histogram.get_total_count(), (key, name)
            assert np.array_equal(counts_of(theirs), counts_of(histogram)), (key, name)


def test_a_replay_at_every_flush_equals_what_the_final_save_writes(tmp_path: Path) -> None:
    """After each flush, the folder holding only the journal loads as the data a
    final save at that instant would have written, number for number."""
    rng = random.Random(7)
    recorder = Recorder(window_s=1.0)
    recorder.origin_s = 0.0
    rows: list[dict] = []
    killed = tmp_path / "killed"
    writer = JournalWriter(killed / DATA_DIR / JOURNAL_FILE, META)
    for second in range(6):
        record_second(recorder, second, rng)
        close_windows(recorder, rows, second)
        meta = {**META, "measured_s": float(second)}
        writer.flush(recorder.buckets, rows, meta)
        saved = tmp_path / f"saved-{second}"
        RunData(meta={**meta, "incomplete_reason": KILLED_REASON}, buckets=recorder.buckets,
                timeseries=rows).save(saved)  # fmt: skip
        assert_same_data(RunData.load(killed), RunData.load(saved))
    assert recorder.buckets[("chat", OVERALL)].counters.failed == 6  # failures journaled too


def test_the_complete_frame_keeps_the_final_metadata(tmp_path: Path) -> None:
    recorder = Recorder()
    recorder.record(request(ttft_ms=50), 1.0)
    path = tmp_path / JOURNAL_FILE
    writer = JournalWriter(path, META)
    writer.flush(recorder.buckets, [], {**META, "complete": True, "measured_s": 8.0})
    before = replay(path)
    assert before.complete is False
    assert before.document["meta"]["complete"] is False
    assert before.document["meta"]["incomplete_reason"] == KILLED_REASON
    writer.complete()
    after = replay(path)
    assert after.complete is True
    assert after.document["meta"] == {**META, "complete": True, "measured_s": 8.0}
    assert writer.flush(recorder.buckets, [], META) == 0  # closed: nothing more


def journal_of_three_flushes(path: Path) -> list[int]:
    """A journal whose flushes add 1, 2 and 3 requests; the file's size after each."""
    recorder = Recorder()
    writer = JournalWriter(path, META)
    sizes = []
    for flush in range(1, 4):
        for _ in range(flush):
            recorder.record(request(ttft_ms=10 * flush), float(flush))
        writer.flush(recorder.buckets, [], {**META, "measured_s": float(flush)})
        sizes.append(path.stat().st_size)
    return sizes


def test_a_torn_last_flush_is_dropped_at_every_byte(tmp_path: Path) -> None:
    """A kill mid-write leaves the file cut anywhere in its last flush: reading
    keeps every earlier frame, the replay stands at the flush before."""
    path = tmp_path / JOURNAL_FILE
    sizes = journal_of_three_flushes(path)
    whole = path.read_bytes()
    all_frames = read_frames(whole).frames
    earlier = read_frames(whole[: sizes[1]]).frames
    assert read_frames(whole).stopped is None and len(earlier) < len(all_frames)
    ends = {sum(9 + len(body) for _, body in all_frames[:n]) for n in range(len(all_frames) + 1)}
    for cut in range(sizes[1], sizes[2]):
        read = read_frames(whole[:cut])
        assert read.frames == all_frames[: len(read.frames)]
        assert len(read.frames) >= len(earlier)
        assert (read.stopped is None) == (cut in ends), cut  # between frames: none torn
        if cut % 8 and cut not in ends:
            continue  # replayed at every frame's end and every 8th byte: a second
        path.write_bytes(whole[:cut])
        replayed = replay(path)
        counters = replayed.buckets[("chat", OVERALL)].counters
        assert (counters.ok, replayed.document["meta"]["measured_s"]) == (3, 2.0), cut


def test_a_torn_last_frame_is_dropped_at_every_byte(tmp_path: Path) -> None:
    frames = [frame(b"W", b"[1]"), frame(b"W", b"[2, 3]"), frame(b"T", b"{}")]
    data = b"".join(frames)
    start = len(data) - len(frames[-1])
    for cut in range(start, len(data)):
        read = read_frames(data[:cut])
        assert read.frames == [(b"W", b"[1]"), (b"W", b"[2, 3]")]
        assert (read.stopped is None) == (cut == start)
    assert read_frames(data).frames[-1] == (b"T", b"{}")


def test_a_corrupt_frame_ends_what_is_read(tmp_path: Path) -> None:
    """A changed byte anywhere in a frame (its length, checksum, kind or body)
    fails its check: the frames before it are kept, none is misread."""
    path = tmp_path / JOURNAL_FILE
    sizes = journal_of_three_flushes(path)
    whole = path.read_bytes()
    all_frames = read_frames(whole).frames
    for offset in range(sizes[1], sizes[2]):
        damaged = bytearray(whole)
        damaged[offset] ^= 0x5A
        read = read_frames(bytes(damaged))
        assert read.stopped is not None, offset
        assert read.frames == all_frames[: len(read.frames)], offset
        if offset % 16 == 0:  # replayed: at the flush before, as a torn one
            path.write_bytes(damaged)
            assert replay(path).buckets[("chat", OVERALL)].counters.ok == 3


def test_a_file_that_is_not_a_journal_is_named_in_the_error(tmp_path: Path) -> None:
    data = tmp_path / "run" / DATA_DIR
    data.mkdir(parents=True)
    (data / JOURNAL_FILE).write_bytes(b"not a journal at all")
    with pytest.raises(ValueError, match=f"{JOURNAL_FILE}: not a slogate journal"):
        RunData.load(tmp_path / "run")
    (data / JOURNAL_FILE).write_bytes(frame(b"H", b'{"schema": "other/9", "meta": {}}'))
    with pytest.raises(ValueError, match="schema 'other/9'"):
        RunData.load(tmp_path / "run")
    header = frame(b"H", b'{"schema": "slogate.journal/1", "meta": {}}')
    for bad in (b'["a", "b", "c"]\n\x09', b'["a", "b"]\n\x00\x01\x00\x01', b"{"):
        (data / JOURNAL_FILE).write_bytes(header + frame(b"D", bad) + frame(b"T", b"{}"))
        with pytest.raises(ValueError, match=f"{JOURNAL_FILE}: a malformed journal frame"):
            RunData.load(tmp_path / "run")


def test_flushes_that_pause_lose_nothing_and_yield_to_a_later_one(tmp_path: Path) -> None:
    """Requests recorded while a flush pauses reach the next; a flush started
    during another's pause (the final one) takes over and writes what both found."""
    recorder = Recorder()
    for i in range(20):
        recorder.record(request(ttft_ms=10 + i, tokens=5 + i), 1.0, stage="a")
    path = tmp_path / JOURNAL_FILE
    writer = JournalWriter(path, META)
    pauses = []

    def record_meanwhile() -> None:
        pauses.append(len(pauses))
        recorder.record(request(ttft_ms=500 + len(pauses), tokens=3), 2.0, stage="b")

    assert writer.flush(recorder.buckets, [], META, record_meanwhile) > 0
    assert len(pauses) > 20  # once per histogram that changed

    def final_meanwhile() -> None:
        if not pauses or pauses[-1] != -1:
            pauses.append(-1)
            recorder.record(request(ttft_ms=900, tokens=7), 3.0)
            writer.flush(recorder.buckets, [], {**META, "complete": True})
            writer.complete()

    assert writer.flush(recorder.buckets, [], META, final_meanwhile) == 0
    replayed = replay(path)
    assert replayed.complete is True
    expected = RunData(meta={**META, "complete": True}, buckets=recorder.buckets)
    assert_same_data(RunData(meta=replayed.document["meta"], buckets=replayed.buckets), expected)


def test_secrets_in_the_metadata_never_reach_the_journal(tmp_path: Path) -> None:
    key = "sk-journal0123456789abcdef"
    path = tmp_path / JOURNAL_FILE
    writer = JournalWriter(path, {**META, "command": f"slogate run --api-key {key}"}, redact)
    changed = {**META, "command": "slogate run", "engine": {"api_key": key}}
    writer.flush({}, [], changed)
    assert key.encode() not in path.read_bytes()
    meta = replay(path).document["meta"]
    assert meta["engine"] == {"api_key": "***"} and meta["command"] == "slogate run"
