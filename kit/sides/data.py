"""The datasets nanoGPT trains on, prepared byte for byte as its own prepare.py scripts write them.

§4 and D2: M1 trains on tiny Shakespeare as characters (nanoGPT's
`data/shakespeare_char/prepare.py`), M2 and M2b on the same text in GPT-2's BPE through tiktoken
(`data/shakespeare/prepare.py`). Both sides of the comparison read the same `train.bin` and
`val.bin`, so the kit writes them itself, checks its input by hash and records what it wrote.

nanoGPT reads a dataset from `data/<dataset>/` relative to its working directory, `<dataset>`
being `shakespeare_char` or `shakespeare`; `prepare_datasets(root, ...)` writes exactly that
layout under `root`, so `root` is what a run mounts or links as `data/`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import requests

from kit.errors import UserError, writing
from kit.results.store import sha256_file
from kit.sides import by_hand

if TYPE_CHECKING:
    import tiktoken

log = logging.getLogger(__name__)

INPUT_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
# karpathy/char-rnn@6f9487a data/tinyshakespeare/input.txt, 1,115,394 bytes.
INPUT_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"

CHAR_DATASET = "shakespeare_char"  # nanoGPT's dataset names: the folder under data/
BPE_DATASET = "shakespeare"

SCHEMA_VERSION = 1  # of prepared.json
RECORD_NAME = "prepared.json"
# pickle.dump's default protocol on Python 3.8 to 3.13, where nanoGPT's prepare.py writes
# meta.pkl; pinned so the file's bytes do not depend on the host's Python (3.14 defaults to 5).
PICKLE_PROTOCOL = 4
TIMEOUT_S = (10.0, 60.0)  # connect, read
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Prepared:
    """What one prepared dataset folder holds; stored as its prepared.json."""

    path: Path
    dataset: str  # nanoGPT's name: CHAR_DATASET or BPE_DATASET
    encoding: str  # "characters" or the tiktoken encoding's name
    vocab_size: int  # of the encoding; nanoGPT trains BPE data with 50,304 (no meta.pkl)
    train_tokens: int
    val_tokens: int
    input_sha256: str
    file_sha256: dict[str, str]  # file name in the folder -> SHA-256

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        del d["path"]
        return {"schema_version": SCHEMA_VERSION, **d}


# ----------------------------------------------------------------------------- the input text


def fetch_input(
    cache_dir: Path,
    given: Path | None = None,
    *,
    expected_sha256: str = INPUT_SHA256,
    url: str = INPUT_URL,
    session: requests.Session | None = None,
) -> Path:
    """Return a tiny Shakespeare `input.txt` whose SHA-256 is the pinned one.

    `given` is the user's own copy, checked and used in place. Without it the kit keeps one in
    `cache_dir/tinyshakespeare/input.txt`, downloading it from nanoGPT's URL the first time.
    """
    if given is not None:
        given = Path(given)
        if not given.is_file():
            raise UserError(f"no input file at {given}", f"download {url} and name that file")
        _input_digest(given, expected_sha256, url)
        return given
    dest = Path(cache_dir) / "tinyshakespeare" / "input.txt"
    if dest.is_file():
        if sha256_file(dest) == expected_sha256:
            return dest
        log.warning("cached %s has the wrong SHA-256; downloading it again", dest)
    fix = by_hand.input_fix(url, dest)
    try:
        download_file(url, dest, session=session)
    except requests.RequestException as e:
        raise UserError(f"could not download tiny Shakespeare from {url}: {e}", fix) from e
    _input_digest(dest, expected_sha256, url)
    return dest


def download_file(url: str, dest: Path, *, session: requests.Session | None = None) -> None:
    """Stream `url` into `dest`, which appears only whole (temporary file, then rename)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.part")
    http = session or requests.Session()
    try:
        with http.get(url, stream=True, timeout=TIMEOUT_S) as r:
            r.raise_for_status()
            # the kit's cache: a full disk names itself, and MICAKIT_CACHE moves the cache
            with writing(dest.parent, elsewhere="MICAKIT_CACHE"), open(tmp, "wb") as f:
                for chunk in r.iter_content(_CHUNK):
                    f.write(chunk)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
        if session is None:
            http.close()


def _read_text(path: Path) -> str:
    # nanoGPT opens the file in text mode: UTF-8 here, with universal newlines.
    text = path.read_bytes().decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _split(text: str) -> tuple[str, str]:
    # Both prepare.py scripts split the characters 90/10 before encoding, with this expression.
    n = len(text)
    return text[: int(n * 0.9)], text[int(n * 0.9) :]


# ----------------------------------------------------------------------------- preparing


def prepare_char(
    input_path: Path, out_dir: Path, *, input_sha256: str | None = INPUT_SHA256
) -> Prepared:
    """Write `train.bin`, `val.bin` and `meta.pkl` as data/shakespeare_char/prepare.py does.

    Returns the folder's record. A folder already prepared from the same input is left as it is.
    """
    digest = _input_digest(input_path, input_sha256)
    done = _reuse(out_dir, CHAR_DATASET, "characters", digest)
    if done is not None:
        return done

    text = _read_text(input_path)
    chars = sorted(set(text))  # the vocabulary: every character the text holds, sorted
    if len(chars) > 1 << 16:
        raise UserError(f"{input_path} holds {len(chars)} distinct characters; uint16 holds 65,536")
    # Built from the one `chars` list, as nanoGPT does, so pickle shares the same strings.
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    train, val = _split(text)
    arrays = {
        "train.bin": np.array([stoi[c] for c in train], dtype=np.uint16),
        "val.bin": np.array([stoi[c] for c in val], dtype=np.uint16),
    }
    meta = {"vocab_size": len(chars), "itos": itos, "stoi": stoi}
    extra = {"meta.pkl": pickle.dumps(meta, protocol=PICKLE_PROTOCOL)}
    return _write(out_dir, CHAR_DATASET, "characters", len(chars), digest, arrays, extra)


def prepare_bpe(
    input_path: Path,
    out_dir: Path,
    encoding: tiktoken.Encoding,
    *,
    input_sha256: str | None = INPUT_SHA256,
) -> Prepared:
    """Write `train.bin` and `val.bin` as data/shakespeare/prepare.py does, with `encoding`.

    The kit passes `kit.sides.gpt2_bpe.gpt2_encoding(...)`; tests pass a small encoding of their
    own. No meta.pkl is written, as nanoGPT writes none there: without one, train.py builds the
    50,304-token model.
    """
    digest = _input_digest(input_path, input_sha256)
    done = _reuse(out_dir, BPE_DATASET, encoding.name, digest)
    if done is not None:
        return done
    if encoding.n_vocab > 1 << 16:
        raise UserError(
            f"encoding {encoding.name} has {encoding.n_vocab} tokens; uint16 holds 65,536"
        )
    train, val = _split(_read_text(input_path))
    arrays = {
        "train.bin": np.array(encoding.encode_ordinary(train), dtype=np.uint16),
        "val.bin": np.array(encoding.encode_ordinary(val), dtype=np.uint16),
    }
    return _write(out_dir, BPE_DATASET, encoding.name, encoding.n_vocab, digest, arrays, {})


def prepare_datasets(
    root: Path,
    input_path: Path,
    encoding: tiktoken.Encoding,
    *,
    input_sha256: str | None = INPUT_SHA256,
) -> tuple[Prepared, Prepared]:
    """Prepare both datasets in nanoGPT's layout: root/shakespeare_char and root/shakespeare."""
    root = Path(root)
    return (
        prepare_char(input_path, root / CHAR_DATASET, input_sha256=input_sha256),
        prepare_bpe(input_path, root / BPE_DATASET, encoding, input_sha256=input_sha256),
    )


def _input_digest(input_path: Path, expected: str | None, url: str = INPUT_URL) -> str:
    got = sha256_file(Path(input_path))
    if expected is not None and got != expected:
        raise UserError(
            f"{input_path} is not tiny Shakespeare as the protocol pins it: "
            f"SHA-256 {got}, expected {expected}",
            f"replace it with {url} (1,115,394 bytes, LF line ends)",
        )
    return got


def load_prepared(out_dir: Path) -> Prepared | None:
    """The record of a prepared folder, or None where there is none the kit can read."""
    path = Path(out_dir) / RECORD_NAME
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    version = d.get("schema_version") if isinstance(d, dict) else None
    if version != SCHEMA_VERSION:
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise UserError(
                f"{path} was written by a newer micakit (schema {version})",
                "upgrade micakit, or delete the folder to prepare it again",
            )
        return None
    del d["schema_version"]
    return Prepared(path=Path(out_dir), **d)


def _reuse(out_dir: Path, dataset: str, encoding: str, input_sha256: str) -> Prepared | None:
    # Preparing twice is a no-op: the same input, encoding and unchanged files are kept.
    rec = load_prepared(out_dir)
    if rec is None or (rec.dataset, rec.encoding, rec.input_sha256) != (
        dataset,
        encoding,
        input_sha256,
    ):
        return None
    for name, digest in rec.file_sha256.items():
        f = Path(out_dir) / name
        if not f.is_file() or sha256_file(f) != digest:
            log.warning("%s changed since it was prepared; preparing %s again", f, out_dir)
            return None
    return rec


def _write(
    out_dir: Path,
    dataset: str,
    encoding: str,
    vocab_size: int,
    input_sha256: str,
    arrays: dict[str, np.ndarray],
    extra: dict[str, bytes],
) -> Prepared:
    out_dir = Path(out_dir)
    needed = sum(a.nbytes for a in arrays.values()) + sum(len(b) for b in extra.values())
    # a full disk names itself and what the data needs; the half-written folder is removed
    with writing(out_dir.parent, needed, elsewhere="--data-dir"):
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        with _staging(out_dir) as tmp:
            for name, arr in arrays.items():
                # raw native-order uint16, as nanoGPT's tofile writes; a plain write, since
                # numpy's tofile says a full disk without its errno ("N requested and 0 written")
                (tmp / name).write_bytes(arr.tobytes())
            for name, blob in extra.items():
                (tmp / name).write_bytes(blob)
            rec = Prepared(
                path=out_dir,
                dataset=dataset,
                encoding=encoding,
                vocab_size=vocab_size,
                train_tokens=int(arrays["train.bin"].size),
                val_tokens=int(arrays["val.bin"].size),
                input_sha256=input_sha256,
                file_sha256={n: sha256_file(tmp / n) for n in sorted([*arrays, *extra])},
            )
            (tmp / RECORD_NAME).write_text(json.dumps(rec.to_json(), indent=2) + "\n")
    log.info("prepared %s: %d train, %d val tokens", out_dir, rec.train_tokens, rec.val_tokens)
    return rec


@contextlib.contextmanager
def _staging(dest: Path) -> Iterator[Path]:
    """A temporary folder beside `dest` that replaces it whole on success, never in part."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        yield tmp
        tmp.chmod(0o755)  # mkdtemp's 0700 would hide the data from a container's other user
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex}")
            dest.rename(old)
            tmp.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
