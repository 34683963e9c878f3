#!/usr/bin/env python3
"""A stand-in for the kit under Docker, for the watchdog's tests: it starts the container
watchdog against the engine named on the command line, names it containers, forgets some, says
`ready PID` (the watchdog's pid) on stdout, and then waits to be killed.

    watched_kit.py HOST API_VERSION +ID... -ID...
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kit.executors.docker.watchdog import Watchdog  # noqa: E402


def main(argv: list[str]) -> int:
    host, api_version, *lines = argv
    watchdog = Watchdog(host, api_version)
    for line in lines:
        if line.startswith("+"):
            watchdog.watch(line[1:])
        elif line.startswith("-"):
            watchdog.forget(line[1:])
    print(f"ready {watchdog.proc.pid}", flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
