"""What scripts/install.sh needs said before it installs (standard library only: it runs before
the kit is installed, under any Python 3.11).

    python scripts/install_plan.py torch-pin                 the protocol's torch version
    python scripts/install_plan.py reachable URL             exit 0 if URL answers, else 1 and why
    python scripts/install_plan.py sizes REPORT.json         what pip's --dry-run --report will
                                                             download, each with its size
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = ROOT / "benchmarks" / "NanoGpt" / "protocol.toml"
TIMEOUT_S = 15.0
DEADLINE_S = 30.0  # for all the sizes together


def torch_pin() -> str:
    """§3 rule 2: the protocol pins PyTorch's version (pytorch.torch)."""
    with open(PROTOCOL, "rb") as f:
        return str(tomllib.load(f)["pytorch"]["torch"])


def reachable(url: str) -> str | None:
    """None where the index answers for torch's page; else why not, in a few words."""
    page = url.rstrip("/") + "/torch/"
    try:
        with urllib.request.urlopen(urllib.request.Request(page, method="HEAD"), timeout=TIMEOUT_S):
            return None
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code} for {page}"
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        return f"{page}: {reason}"


def _size(url: str) -> int | None:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        path = urllib.request.url2pathname(parsed.path)
        return os.path.getsize(path) if os.path.isfile(path) else None
    try:
        request = urllib.request.Request(url.split("#")[0], method="HEAD")
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            length = response.headers.get("Content-Length")
            return int(length) if length else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _sizes(urls: list[str]) -> list[int | None]:
    """Each URL's size, asked all at once; what has not answered within DEADLINE_S stays
    unknown (a name lookup that hangs is bounded by no timeout of urllib's, so the asking
    threads are daemons, left behind rather than waited for)."""
    found: list[int | None] = [None] * len(urls)

    def ask(i: int) -> None:
        found[i] = _size(urls[i])

    threads = [threading.Thread(target=ask, args=(i,), daemon=True) for i in range(len(urls))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + DEADLINE_S
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return list(found)


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def sizes(report_path: str) -> int:
    """Print every package pip will fetch (name, version, size, where from) and the total."""
    report = json.loads(Path(report_path).read_text())
    items = [
        (x["metadata"]["name"], x["metadata"]["version"], x["download_info"]["url"])
        for x in report.get("install", [])
        if not x["download_info"].get("dir_info")  # the kit itself, from the checkout
    ]
    if not items:
        print("nothing to download: everything is installed already", file=sys.stderr)
        return 0
    found = _sizes([url for _, _, url in items])
    rows = sorted(zip(found, items, strict=True), key=lambda r: -(r[0] or 0))
    width = max(len(f"{name} {version}") for _, (name, version, _) in rows)
    print(f"to download: {len(rows)} packages", file=sys.stderr)
    for size, (name, version, url) in rows:
        host = urllib.parse.urlparse(url).netloc or "this disk"
        said = _mb(size) if size is not None else "size not said"
        print(f"  {f'{name} {version}':<{width}}  {said:>12}  from {host}", file=sys.stderr)
    total = sum(s for s in found if s)
    unknown = sum(1 for s in found if s is None)
    more = f" (and {unknown} of unknown size)" if unknown else ""
    print(f"total to download: {_mb(total)}{more}", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["torch-pin"]:
        print(torch_pin())
        return 0
    if argv[:1] == ["reachable"] and len(argv) == 2:
        why = reachable(argv[1])
        if why is not None:
            print(why)
            return 1
        return 0
    if argv[:1] == ["sizes"] and len(argv) == 2:
        return sizes(argv[1])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
