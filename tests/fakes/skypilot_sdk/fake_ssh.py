"""ssh as rsync calls it (`rsync -e "python fake_ssh.py" HOST:PATH DEST`), for a machine that is
a folder: HOST's home is $FAKE_SKY_HOME/HOST, where the remote command runs in a shell."""

from __future__ import annotations

import os
import sys
from pathlib import Path

args = sys.argv[1:]
while args and args[0].startswith("-"):  # ssh's own options, as rsync may pass them
    args = args[1:]
host, command = args[0], " ".join(args[1:])
home = Path(os.environ["FAKE_SKY_HOME"]) / host
if not home.is_dir():
    print(f"ssh: Could not resolve hostname {host}", file=sys.stderr)
    sys.exit(255)
os.chdir(home)
os.execvp("sh", ["sh", "-c", command])
