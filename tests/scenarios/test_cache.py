"""What slogate keeps between runs: keys that never run parts together, the
user's cache folder, and writes that are atomic and never fail a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from slogate.scenarios.cache import cache_dir, key_of, store


def test_keys_depend_on_every_part_and_where_parts_end() -> None:
    assert key_of(b"ab", b"c") != key_of(b"a", b"bc")
    assert key_of(b"ab", b"c") == key_of(b"ab", b"c")
    assert key_of(b"x") != key_of(b"x", b"")
    assert len(key_of(b"x")) == 32 and int(key_of(b"x"), 16) >= 0


def test_the_cache_lives_under_xdg_cache_home_else_the_home_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir("corpora") == tmp_path / "slogate" / "corpora"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir("corpora") == tmp_path / "home" / ".cache" / "slogate" / "corpora"


def test_a_store_is_atomic_and_one_that_cannot_write_is_no_error(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "entry.bin"
    store(path, lambda f: f.write(b"old"))
    assert path.read_bytes() == b"old"

    def half_written(f) -> None:
        f.write(b"ne")
        raise OSError("disk full")

    store(path, half_written)
    assert path.read_bytes() == b"old"  # the entry is whole or absent, never half
    assert [p.name for p in path.parent.iterdir()] == ["entry.bin"]  # no temporary file left
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    store(blocked / "entry.bin", lambda f: f.write(b"x"))  # cannot make the folder: no error
    assert blocked.read_text() == "not a folder"
