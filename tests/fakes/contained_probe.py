#!/usr/bin/env python3
"""A measured program that tries what a contained one must not do, for the Docker tests.

It waits until GO_FILE exists (so the test can inspect its container while it runs), then
prints one JSON line: what each attempt gave (an errno name, or "allowed") and what the kernel
says of its credentials.

    contained_probe.py GO_FILE
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import time


def attempt(action) -> str:
    try:
        action()
    except OSError as e:
        return errno.errorcode.get(e.errno or 0, str(e))
    return "allowed"


def write_root() -> None:
    with open("/contained-probe", "w") as f:
        f.write("x")


def write_tmp() -> None:
    with open("/tmp/contained-probe", "w") as f:
        f.write("x")


def reach_out() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(3)
        s.connect(("1.1.1.1", 53))


def main(go_file: str) -> int:
    deadline = time.monotonic() + 120
    while not os.path.exists(go_file) and time.monotonic() < deadline:
        time.sleep(0.05)
    status = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs"):
                status[key] = value.strip()
    found = {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "write_root": attempt(write_root),
        "write_tmp": attempt(write_tmp),
        "connect": attempt(reach_out),
        "interfaces": sorted(os.listdir("/sys/class/net")),
        "status": status,
    }
    print(json.dumps(found, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
