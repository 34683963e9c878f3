"""The kit's entry point: `python run.py ...` is `micakit ...`."""

from kit.cli.program import run

if __name__ == "__main__":
    run()
