"""Listing a source's roots in full or from a key on, on local disk and on S3."""

from __future__ import annotations

import os

import pyarrow.fs as pafs
import pytest

from framework.sources.files.roots import list_roots
from framework.storage import filesystem

LAYOUT = ["2026/11/25/23/a.json", "2026/11/26/00/a.json", "2026/11/26/00/b.json",
          "2026/11/26/01/a.json", "2026/12/01/00/a.json", "dt=2026-11-26/x.json",
          "2026/11/26/00/_SUCCESS", "2026/11/26/00/.a.json.crc", "2026/11/26/00/a.tmp"]


def land(root: str, keys: list[str]) -> None:
    fs, base, _ = filesystem(root)
    for key in keys:
        fs.create_dir(os.path.dirname(f"{base}/{key}"), recursive=True)
        with fs.open_output_stream(f"{base}/{key}") as out:
            out.write(b"{}\n")


def keys(listing) -> list[str]:
    return sorted(listing.files["key"].to_pylist())


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "landing")
    return request.getfixturevalue("bucket") + "/landing"


def test_a_full_listing_has_every_data_file(root):
    land(root, LAYOUT)
    found = list_roots([root], recurse=True, exclusions=["*.tmp"])
    assert found.complete
    assert keys(found) == ["2026/11/25/23/a.json", "2026/11/26/00/a.json",
                           "2026/11/26/00/b.json", "2026/11/26/01/a.json",
                           "2026/12/01/00/a.json", "dt=2026-11-26/x.json"]
    assert set(found.files["path"].to_pylist()) == {f"{root}/{k}" for k in keys(found)}


def test_a_listing_from_a_key_on_has_only_the_keys_after_it(root):
    land(root, LAYOUT)
    found = list_roots([root], recurse=True, exclusions=["*.tmp"],
                       after={root: "2026/11/26/00/a.json"})
    assert not found.complete
    assert keys(found) == ["2026/11/26/00/b.json", "2026/11/26/01/a.json",
                           "2026/12/01/00/a.json", "dt=2026-11-26/x.json"]
    # From a directory on (partitions): the whole directory and those after it.
    found = list_roots([root], recurse=True, exclusions=["*.tmp"],
                       after={root: "2026/11/26/01/"})
    assert keys(found) == ["2026/11/26/01/a.json", "2026/12/01/00/a.json",
                           "dt=2026-11-26/x.json"]


def test_a_local_listing_from_a_key_skips_the_directories_before_it(tmp_path, monkeypatch):
    root = str(tmp_path)
    land(root, [f"2026/11/{day:02}/{hour:02}/f.json" for day in range(1, 27)
                for hour in range(24)])
    opened = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: opened.append(path) or real(path))
    found = list_roots([root], recurse=True, exclusions=[], after={root: "2026/11/26/22/"})
    assert keys(found) == ["2026/11/26/22/f.json", "2026/11/26/23/f.json"]
    assert len(opened) == 6  # root, 2026, 11, 26, 26/22, 26/23: not the 600 hours before


def test_modification_times_come_from_the_store(root):
    land(root, ["a.json"])
    fs, base, _ = filesystem(root)
    info = fs.get_file_info(f"{base}/a.json")
    for after in (None, {root: ""}):
        [modified] = list_roots([root], recurse=True, exclusions=[],
                                after=after).files["modified_ms"].to_pylist()
        assert abs(modified - info.mtime_ns // 1_000_000) < 1000
    assert info.type == pafs.FileType.File


def test_a_missing_root_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere does not exist"):
        list_roots([str(tmp_path / "nowhere")], recurse=True, exclusions=[])
