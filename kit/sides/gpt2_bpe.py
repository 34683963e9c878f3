"""GPT-2's BPE files for the PyTorch side's BPE dataset (data/shakespeare/prepare.py), staged
into the kit's own tiktoken cache: from the cache, a folder the user names, or the network, each
checked against the SHA-256 tiktoken itself expects.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import requests

from kit.errors import UserError, writing
from kit.results.store import sha256_file
from kit.sides.data import download_file

if TYPE_CHECKING:
    import tiktoken

log = logging.getLogger(__name__)

# The files tiktoken's "gpt2" encoding is built from, with the URLs and SHA-256 that tiktoken
# itself names (tiktoken_ext/openai_public.py). tiktoken caches a file under the SHA-1 of its URL.
GPT2_FILES: dict[str, tuple[str, str]] = {
    "vocab.bpe": (
        "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe",
        "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    ),
    "encoder.json": (
        "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json",
        "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    ),
}


def _tiktoken_cache_name(url: str) -> str:
    return hashlib.sha1(url.encode()).hexdigest()  # tiktoken's own cache key


def stage_gpt2_files(
    cache_dir: Path,
    files_dir: Path | None = None,
    *,
    files: dict[str, tuple[str, str]] = GPT2_FILES,
    session: requests.Session | None = None,
) -> Path:
    """Fill the kit's tiktoken cache, `cache_dir/tiktoken`, with GPT-2's BPE files; return it.

    A file comes from the cache if there, else from `files_dir` (the user's folder, holding
    `vocab.bpe` and `encoder.json` or tiktoken's own cache files), else from the network. Every
    file is checked against the SHA-256 tiktoken expects.
    """
    tk_dir = Path(cache_dir) / "tiktoken"
    tk_dir.mkdir(parents=True, exist_ok=True)
    missing: list[str] = []
    for name, (url, digest) in files.items():
        dest = tk_dir / _tiktoken_cache_name(url)
        if dest.is_file() and sha256_file(dest) == digest:
            continue
        if files_dir is not None:
            found = [
                p for p in (Path(files_dir) / name, Path(files_dir) / dest.name) if p.is_file()
            ]
            if found:
                got = sha256_file(found[0])
                if got != digest:
                    raise UserError(
                        f"{found[0]} is not GPT-2's {name}: SHA-256 {got}, expected {digest}",
                        f"download {url} again into {files_dir}",
                    )
                tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.part")
                # a copy on a full disk names its source: the cache's disk is the one named
                try:
                    with writing(tk_dir, elsewhere="MICAKIT_CACHE"):
                        shutil.copyfile(found[0], tmp)
                        os.replace(tmp, dest)
                finally:
                    tmp.unlink(missing_ok=True)  # a half copy is not left in the cache
                continue
        try:
            download_file(url, dest, session=session)
        except requests.RequestException as e:
            log.warning("could not download %s: %s", url, e)
            missing.append(name)
            continue
        if sha256_file(dest) != digest:
            dest.unlink()
            missing.append(name)
    if missing:
        where = f" (not in {files_dir})" if files_dir is not None else ""
        raise UserError(
            f"GPT-2's BPE files could not be had{where}: {', '.join(missing)}",
            "on a machine with internet, download "
            + " and ".join(files[n][0] for n in missing)
            + " into one folder and name that folder to the kit (vocab.bpe and encoder.json), "
            f"or copy them into {tk_dir} under the names tiktoken gives them: "
            + ", ".join(f"{n} as {_tiktoken_cache_name(files[n][0])}" for n in missing),
        )
    return tk_dir


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def gpt2_encoding(
    cache_dir: Path, files_dir: Path | None = None, *, session: requests.Session | None = None
) -> tiktoken.Encoding:
    """tiktoken's "gpt2" encoding, as data/shakespeare/prepare.py gets it, from the kit's cache."""
    import tiktoken  # lazy: only the BPE dataset needs it, and it loads a Rust extension

    tk_dir = stage_gpt2_files(cache_dir, files_dir, session=session)
    # tiktoken reads TIKTOKEN_CACHE_DIR on every load; with the files staged it needs no network.
    with _env("TIKTOKEN_CACHE_DIR", str(tk_dir)):
        return tiktoken.get_encoding("gpt2")
