"""nanoGPT's source at the pinned commit: the download, its cache, and a checkout the user names.

The archive is built here (files of the tests' own, with their own hashes) and served by a
local HTTP server on 127.0.0.1, so nothing reaches the network.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import logging
import os
import shutil
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from kit.errors import UserError
from kit.sides import nanogpt

COMMIT = nanogpt.COMMIT
OTHER = "0123456789abcdef0123456789abcdef01234567"
FILES = {name: f"# stand-in for nanoGPT's {name}\n".encode() for name in nanogpt.FILE_SHA256}
SHA = {name: hashlib.sha256(data).hexdigest() for name, data in FILES.items()}


def make_archive(
    files: dict[str, bytes] = FILES,
    *,
    top: str = f"nanoGPT-{COMMIT}",
    commit: str | None = COMMIT,
    extra: list[tarfile.TarInfo] | None = None,
) -> bytes:
    """A .tar.gz laid out as GitHub's: one top folder, the commit in the pax global header."""
    buf = io.BytesIO()
    headers = {"comment": commit} if commit else {}
    with tarfile.open(
        fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT, pax_headers=headers
    ) as t:
        d = tarfile.TarInfo(top + "/")
        d.type = tarfile.DIRTYPE
        t.addfile(d)
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        for info in extra or []:
            t.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return buf.getvalue()


class Server:
    """Serves `body` at any path on 127.0.0.1 and counts the requests."""

    def __init__(self) -> None:
        self.body: bytes | None = make_archive()
        self.requests = 0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.requests += 1
                if server.body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(server.body)))
                self.end_headers()
                self.wfile.write(server.body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/nanoGPT.tar.gz"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


class NoNetwork(requests.Session):
    def get(self, *args: object, **kwargs: object) -> requests.Response:  # type: ignore[override]
        raise AssertionError("the network was used")


def download(cache: Path, server: Server, **kw: object) -> Path:
    return nanogpt.download(COMMIT, None, cache, file_sha256=SHA, url=server.url, **kw)  # type: ignore[arg-type]


def test_download_unpacks_checks_and_caches(tmp_path: Path, server: Server):
    src = download(tmp_path, server)
    assert src == tmp_path / f"nanoGPT-{COMMIT}"
    for name, data in FILES.items():
        assert (src / name).read_bytes() == data
    assert server.requests == 1
    # Cached: the second call neither downloads nor unpacks.
    again = nanogpt.download(COMMIT, None, tmp_path, file_sha256=SHA, session=NoNetwork())
    assert again == src and server.requests == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_archive_placed_by_hand_needs_no_network(tmp_path: Path):
    (tmp_path / f"nanoGPT-{COMMIT}.tar.gz").write_bytes(make_archive())
    src = nanogpt.download(COMMIT, None, tmp_path, file_sha256=SHA, session=NoNetwork())
    assert (src / "train.py").read_bytes() == FILES["train.py"]


def test_changed_cache_is_unpacked_again(tmp_path: Path, server: Server):
    src = download(tmp_path, server)
    (src / "model.py").write_text("changed\n")
    assert download(tmp_path, server) == src
    assert (src / "model.py").read_bytes() == FILES["model.py"]


def test_archive_hash_only_warns(tmp_path: Path, server: Server, caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.WARNING, logger="kit.sides.nanogpt"):
        src = nanogpt.download(COMMIT, "0" * 64, tmp_path, file_sha256=SHA, url=server.url)
    assert (src / "train.py").is_file()
    assert "files are what is checked" in caplog.text


def test_archive_with_other_files_is_refused(tmp_path: Path, server: Server):
    server.body = make_archive({**FILES, "model.py": b"not the pinned model\n"})
    with pytest.raises(UserError) as e:
        download(tmp_path, server)
    assert "model.py: SHA-256" in e.value.message and "train.py" not in e.value.message
    assert "--nanogpt PATH" in str(e.value.fix)
    assert not (tmp_path / f"nanoGPT-{COMMIT}").exists()
    assert not (tmp_path / f"nanoGPT-{COMMIT}.tar.gz").exists()  # a bad archive is not kept


def test_archive_of_other_commit_is_refused(tmp_path: Path, server: Server):
    server.body = make_archive(commit=OTHER)
    with pytest.raises(UserError, match=f"at commit {OTHER}"):
        download(tmp_path, server)


@pytest.mark.parametrize("name", ["../evil.py", "/abs/evil.py", "x/../../evil.py"])
def test_path_traversal_is_refused(tmp_path: Path, server: Server, name: str):
    top = f"nanoGPT-{COMMIT}"
    evil = tarfile.TarInfo(f"{top}/{name}" if not name.startswith("/") else name)
    evil.size = 1
    server.body = make_archive(extra=[evil])
    cache = tmp_path / "cache"
    with pytest.raises(UserError):
        download(cache, server)
    assert not any(p.name == "evil.py" for p in tmp_path.rglob("*"))


def test_links_are_not_unpacked(tmp_path: Path, server: Server):
    link = tarfile.TarInfo(f"nanoGPT-{COMMIT}/passwd")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    server.body = make_archive(extra=[link])
    src = download(tmp_path, server)
    assert not (src / "passwd").exists() and not (src / "passwd").is_symlink()


def test_failed_download_says_what_to_do(tmp_path: Path, server: Server):
    server.body = None  # 404
    with pytest.raises(UserError) as e:
        download(tmp_path, server)
    assert "could not download nanoGPT" in e.value.message
    assert f"nanoGPT-{COMMIT}.tar.gz" in str(e.value.fix) and "--nanogpt" in str(e.value.fix)


def test_garbage_archive_is_refused(tmp_path: Path, server: Server):
    server.body = b"<html>rate limited</html>"
    with pytest.raises(UserError, match="could not be unpacked"):
        download(tmp_path, server)


def test_short_commit_is_refused(tmp_path: Path):
    with pytest.raises(UserError, match="40-digit"):
        nanogpt.download("3adf61e", None, tmp_path)


# ----------------------------------------------------------------------------- checkouts


def make_checkout(root: Path, head: str = "ref: refs/heads/master\n") -> Path:
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    git = root / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text(head)
    return root


def check(path: Path) -> Path:
    return nanogpt.from_checkout(path, COMMIT, file_sha256=SHA)


def test_checkout_with_packed_ref(tmp_path: Path):
    co = make_checkout(tmp_path)
    (co / ".git" / "packed-refs").write_text(
        f"# pack-refs with: peeled fully-peeled sorted\n{OTHER} refs/heads/dev\n"
        f"{COMMIT} refs/heads/master\n^{OTHER}\n"
    )
    assert nanogpt.read_head(co) == COMMIT
    assert check(co) == co.resolve()


def test_checkout_with_loose_ref_at_other_commit(tmp_path: Path):
    co = make_checkout(tmp_path)
    (co / ".git" / "packed-refs").write_text(f"{COMMIT} refs/heads/master\n")
    (co / ".git" / "refs" / "heads" / "master").write_text(OTHER + "\n")  # loose wins
    with pytest.raises(UserError) as e:
        check(co)
    assert OTHER in e.value.message and COMMIT in e.value.message
    assert f"checkout {COMMIT}" in str(e.value.fix)


def test_detached_head(tmp_path: Path):
    assert check(make_checkout(tmp_path, head=COMMIT + "\n")) == tmp_path.resolve()
    (tmp_path / ".git" / "HEAD").write_text(OTHER + "\n")
    with pytest.raises(UserError, match=OTHER):
        check(tmp_path)


def test_worktree_gitdir_file(tmp_path: Path):
    main = tmp_path / "main" / ".git"
    (main / "refs" / "heads").mkdir(parents=True)
    (main / "refs" / "heads" / "pinned").write_text(COMMIT + "\n")
    wt_git = main / "worktrees" / "wt"
    wt_git.mkdir(parents=True)
    (wt_git / "HEAD").write_text("ref: refs/heads/pinned\n")
    (wt_git / "commondir").write_text("../..\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {wt_git}\n")
    assert nanogpt.read_head(wt) == COMMIT


def test_folder_without_git_is_checked_by_files(tmp_path: Path):
    co = make_checkout(tmp_path)
    shutil.rmtree(co / ".git")  # an unpacked archive, say
    assert nanogpt.read_head(co) is None
    assert check(co) == co.resolve()


def test_changed_file_is_named(tmp_path: Path):
    co = make_checkout(tmp_path, head=COMMIT + "\n")
    (co / "configurator.py").write_text("changed\n")
    (co / "data" / "shakespeare" / "prepare.py").unlink()
    with pytest.raises(UserError) as e:
        check(co)
    assert "configurator.py: SHA-256" in e.value.message
    assert "data/shakespeare/prepare.py: missing" in e.value.message
    assert "model.py" not in e.value.message


def test_not_a_nanogpt_folder(tmp_path: Path):
    with pytest.raises(UserError, match="no train.py"):
        check(tmp_path)


def test_pinned_hashes_are_d2s():
    # D2 (protocol.toml [nanogpt]), word for word: the kit's defaults are the protocol's.
    assert nanogpt.COMMIT == "3adf61e154c3fe3fca428ad6bc3818b27a3b8291"
    assert nanogpt.FILE_SHA256["train.py"] == (
        "413bd97b40bb400a2a0d01230e2946f056c263ebac1b7281c2367d964a123085"
    )
    assert len(nanogpt.FILE_SHA256) == 6
    assert set(nanogpt.RUN_FILES) <= set(nanogpt.FILE_SHA256)


NANOGPT = os.environ.get("MICAKIT_NANOGPT")


@pytest.mark.nanogpt
@pytest.mark.skipif(not NANOGPT, reason="MICAKIT_NANOGPT names no nanoGPT checkout")
def test_real_checkout_matches_d2():
    path = Path(str(NANOGPT))
    assert nanogpt.verify_files(path) == []
    if nanogpt.read_head(path) is not None:
        assert nanogpt.read_head(path) == nanogpt.COMMIT
    assert nanogpt.from_checkout(path) == path.resolve()
