"""The datasets, prepared as nanoGPT's prepare.py scripts write them (D2)."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import runpy
import shutil
from pathlib import Path

import numpy as np
import pytest
import requests
import tiktoken

from kit.errors import UserError
from kit.sides import data, gpt2_bpe
from tests.conftest import REAL_INPUT as SHARED_INPUT
from tests.conftest import needs_real_input as needs_input

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n" * 7
# GPT-2's split pattern (tiktoken's r50k), with a vocabulary small enough to build here.
PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def small_encoding(name: str = "test-bpe") -> tiktoken.Encoding:
    ranks = {bytes([i]): i for i in range(256)}
    for piece in (b"ea", b"pe", b" s", b" spe", b"ak", b"eak", b" speak", b"er", b"th"):
        ranks[piece] = len(ranks)
    return tiktoken.Encoding(
        name=name, pat_str=PAT, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": len(ranks)}
    )


def write_input(tmp_path: Path, text: str = TEXT) -> tuple[Path, str]:
    path = tmp_path / "input.txt"
    path.write_text(text, encoding="utf-8", newline="\n")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


class FakeResponse:
    def __init__(self, body: bytes | None) -> None:
        self.body = body

    def __enter__(self) -> FakeResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def raise_for_status(self) -> None:
        if self.body is None:
            raise requests.HTTPError("404 Not Found")

    def iter_content(self, size: int) -> list[bytes]:
        assert self.body is not None
        return [self.body[i : i + size] for i in range(0, len(self.body), size)]


class FakeSession(requests.Session):
    """Answers from a dict of URL -> bytes; counts what was asked; no network."""

    def __init__(self, pages: dict[str, bytes] | None = None, offline: bool = False) -> None:
        super().__init__()
        self.pages = pages or {}
        self.offline = offline
        self.asked: list[str] = []

    def get(self, url: str, **kw: object) -> FakeResponse:  # type: ignore[override]
        assert kw.get("timeout"), "every request has a timeout"
        self.asked.append(url)
        if self.offline:
            raise requests.ConnectionError("no network")
        return FakeResponse(self.pages.get(url))


# ----------------------------------------------------------------------------- characters


@needs_input
def test_char_dataset_from_tiny_shakespeare(tmp_path: Path):
    rec = data.prepare_char(SHARED_INPUT, tmp_path / "shakespeare_char")
    # The counts nanoGPT's data/shakespeare_char/prepare.py prints (D2: vocabulary 65, 90/10).
    assert (rec.train_tokens, rec.val_tokens, rec.vocab_size) == (1_003_854, 111_540, 65)
    out = tmp_path / "shakespeare_char"
    train = np.fromfile(out / "train.bin", dtype=np.uint16)
    val = np.fromfile(out / "val.bin", dtype=np.uint16)
    assert (train.size, val.size) == (1_003_854, 111_540)
    with open(out / "meta.pkl", "rb") as f:
        raw = f.read()
    assert raw[:2] == b"\x80\x04"  # pickle protocol 4, as nanoGPT's pickle.dump on Python <= 3.13
    meta = pickle.loads(raw)
    assert list(meta) == ["vocab_size", "itos", "stoi"] and meta["vocab_size"] == 65
    chars = "".join(meta["itos"][i] for i in range(65))
    assert chars == "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    assert meta["stoi"] == {c: i for i, c in enumerate(chars)}
    text = SHARED_INPUT.read_text(encoding="utf-8")
    assert "".join(meta["itos"][int(i)] for i in val) == text[1_003_854:]
    assert "".join(meta["itos"][int(i)] for i in train[:1000]) == text[:1000]
    assert (
        rec.file_sha256["train.bin"] == hashlib.sha256((out / "train.bin").read_bytes()).hexdigest()
    )


def test_wrong_input_hash_is_a_user_error(tmp_path: Path):
    path, _ = write_input(tmp_path)
    with pytest.raises(UserError) as e:
        data.prepare_char(path, tmp_path / "out")
    assert data.INPUT_SHA256 in e.value.message and data.INPUT_URL in str(e.value.fix)
    assert not (tmp_path / "out").exists()


def test_preparing_twice_is_a_no_op(tmp_path: Path):
    path, digest = write_input(tmp_path)
    out = tmp_path / "shakespeare_char"
    first = data.prepare_char(path, out, input_sha256=digest)
    stamps = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    second = data.prepare_char(path, out, input_sha256=digest)
    assert second == first
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == stamps
    record = json.loads((out / "prepared.json").read_text())
    assert record["schema_version"] == data.SCHEMA_VERSION
    assert record["train_tokens"] == first.train_tokens and record["input_sha256"] == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.txt", "shakespeare_char"]


def test_changed_file_is_prepared_again(tmp_path: Path):
    path, digest = write_input(tmp_path)
    out = tmp_path / "shakespeare_char"
    first = data.prepare_char(path, out, input_sha256=digest)
    (out / "val.bin").write_bytes(b"\0\0")
    assert data.prepare_char(path, out, input_sha256=digest) == first
    assert (
        hashlib.sha256((out / "val.bin").read_bytes()).hexdigest() == first.file_sha256["val.bin"]
    )


def test_newer_record_is_refused(tmp_path: Path):
    out = tmp_path / "shakespeare_char"
    out.mkdir()
    (out / "prepared.json").write_text(json.dumps({"schema_version": data.SCHEMA_VERSION + 1}))
    with pytest.raises(UserError, match="newer micakit"):
        data.load_prepared(out)


# ----------------------------------------------------------------------------- BPE


def test_bpe_end_to_end_with_a_small_encoding(tmp_path: Path):
    enc = small_encoding()
    path, digest = write_input(tmp_path)
    char_rec, bpe_rec = data.prepare_datasets(tmp_path / "data", path, enc, input_sha256=digest)
    out = tmp_path / "data" / "shakespeare"
    n = len(TEXT)
    train_text, val_text = TEXT[: int(n * 0.9)], TEXT[int(n * 0.9) :]  # split by characters
    train = np.fromfile(out / "train.bin", dtype=np.uint16).tolist()
    val = np.fromfile(out / "val.bin", dtype=np.uint16).tolist()
    assert train == enc.encode_ordinary(train_text) and val == enc.encode_ordinary(val_text)
    assert enc.decode(train) == train_text and enc.decode(val) == val_text
    assert len(train) < len(train_text)  # the merges took effect
    assert not (out / "meta.pkl").exists()  # none, as nanoGPT: train.py then uses 50,304
    assert (bpe_rec.dataset, bpe_rec.encoding, bpe_rec.vocab_size) == (
        "shakespeare",
        "test-bpe",
        266,
    )
    assert (bpe_rec.train_tokens, bpe_rec.val_tokens) == (len(train), len(val))
    assert char_rec.path == tmp_path / "data" / "shakespeare_char"
    # Another encoding is another preparation.
    again = data.prepare_bpe(path, out, small_encoding("other"), input_sha256=digest)
    assert again.encoding == "other"


# ----------------------------------------------------------------------------- the input file


def test_fetch_input_downloads_once_and_checks(tmp_path: Path):
    body = TEXT.encode()
    digest = hashlib.sha256(body).hexdigest()
    session = FakeSession({data.INPUT_URL: body})
    got = data.fetch_input(tmp_path, expected_sha256=digest, session=session)
    assert got == tmp_path / "tinyshakespeare" / "input.txt" and got.read_bytes() == body
    assert data.fetch_input(tmp_path, expected_sha256=digest, session=session) == got
    assert session.asked == [data.INPUT_URL]


def test_fetch_input_refuses_a_wrong_download(tmp_path: Path):
    session = FakeSession({data.INPUT_URL: b"<html>not Shakespeare</html>"})
    with pytest.raises(UserError, match="not tiny Shakespeare"):
        data.fetch_input(tmp_path, session=session)


def test_fetch_input_offline_says_where_to_put_it(tmp_path: Path):
    with pytest.raises(UserError) as e:
        data.fetch_input(tmp_path, session=FakeSession(offline=True))
    assert str(tmp_path / "tinyshakespeare" / "input.txt") in str(e.value.fix)
    assert data.INPUT_URL in str(e.value.fix)


def test_fetch_input_given_file(tmp_path: Path):
    path, digest = write_input(tmp_path)
    assert data.fetch_input(tmp_path / "cache", path, expected_sha256=digest) == path
    with pytest.raises(UserError, match="not tiny Shakespeare"):
        data.fetch_input(tmp_path / "cache", path)
    with pytest.raises(UserError, match="no input file"):
        data.fetch_input(tmp_path / "cache", tmp_path / "missing.txt")


# ----------------------------------------------------------------------------- tiktoken's files

FAKE_FILES = {
    "vocab.bpe": ("https://example.invalid/vocab.bpe", hashlib.sha256(b"merges").hexdigest()),
    "encoder.json": ("https://example.invalid/encoder.json", hashlib.sha256(b"{}").hexdigest()),
}


def cache_name(url: str) -> str:
    return hashlib.sha1(url.encode()).hexdigest()


def test_gpt2_files_from_the_users_folder(tmp_path: Path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "vocab.bpe").write_bytes(b"merges")
    # encoder.json under tiktoken's own cache name works as well
    (mine / cache_name(FAKE_FILES["encoder.json"][0])).write_bytes(b"{}")
    offline = FakeSession(offline=True)
    tk = gpt2_bpe.stage_gpt2_files(tmp_path / "cache", mine, files=FAKE_FILES, session=offline)
    assert tk == tmp_path / "cache" / "tiktoken"
    assert (tk / cache_name(FAKE_FILES["vocab.bpe"][0])).read_bytes() == b"merges"
    assert (tk / cache_name(FAKE_FILES["encoder.json"][0])).read_bytes() == b"{}"
    assert offline.asked == []
    # Cached: no folder and no network needed any more.
    assert gpt2_bpe.stage_gpt2_files(tmp_path / "cache", files=FAKE_FILES, session=offline) == tk


def test_gpt2_files_downloaded_with_hash_check(tmp_path: Path):
    pages = {FAKE_FILES["vocab.bpe"][0]: b"merges", FAKE_FILES["encoder.json"][0]: b"{}"}
    session = FakeSession(pages)
    tk = gpt2_bpe.stage_gpt2_files(tmp_path, files=FAKE_FILES, session=session)
    assert sorted(p.name for p in tk.iterdir()) == sorted(
        cache_name(u) for u, _ in FAKE_FILES.values()
    )
    pages[FAKE_FILES["vocab.bpe"][0]] = b"tampered"
    with pytest.raises(UserError, match="vocab.bpe"):
        gpt2_bpe.stage_gpt2_files(tmp_path / "other", files=FAKE_FILES, session=FakeSession(pages))


def test_gpt2_wrong_file_in_users_folder(tmp_path: Path):
    (tmp_path / "vocab.bpe").write_bytes(b"something else")
    with pytest.raises(UserError, match="is not GPT-2's vocab.bpe"):
        gpt2_bpe.stage_gpt2_files(tmp_path / "c", tmp_path, files=FAKE_FILES, session=FakeSession())


def test_gpt2_files_nowhere_says_what_to_download(tmp_path: Path):
    with pytest.raises(UserError) as e:
        gpt2_bpe.gpt2_encoding(tmp_path, session=FakeSession(offline=True))
    fix = str(e.value.fix)
    assert "vocab.bpe" in e.value.message and "encoder.json" in e.value.message
    for url, _ in gpt2_bpe.GPT2_FILES.values():
        assert url in fix and cache_name(url) in fix
    assert str(tmp_path / "tiktoken") in fix
    assert "TIKTOKEN_CACHE_DIR" not in os.environ or os.environ["TIKTOKEN_CACHE_DIR"] != str(
        tmp_path / "tiktoken"
    )


# ----------------------------------------------------------------------------- real nanoGPT

NANOGPT = os.environ.get("MICAKIT_NANOGPT")


@pytest.mark.nanogpt
@needs_input
@pytest.mark.skipif(not NANOGPT, reason="MICAKIT_NANOGPT names no nanoGPT checkout")
def test_byte_for_byte_as_nanogpts_prepare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run nanoGPT's own prepare.py scripts beside the kit's and compare every byte."""
    enc = small_encoding()
    ours = tmp_path / "ours"
    data.prepare_datasets(ours, SHARED_INPUT, enc)
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: enc)  # no network
    for dataset, names in (
        ("shakespeare_char", ["train.bin", "val.bin", "meta.pkl"]),
        ("shakespeare", ["train.bin", "val.bin"]),
    ):
        theirs = tmp_path / "theirs" / dataset
        theirs.mkdir(parents=True)
        shutil.copyfile(Path(str(NANOGPT)) / "data" / dataset / "prepare.py", theirs / "prepare.py")
        shutil.copyfile(SHARED_INPUT, theirs / "input.txt")
        runpy.run_path(str(theirs / "prepare.py"), run_name="__main__")
        for name in names:
            assert (theirs / name).read_bytes() == (ours / dataset / name).read_bytes(), name
