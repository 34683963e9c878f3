"""The kit's entry point: `python run.py ...` is `micakit ...`."""

from kit.cli import main

if __name__ == "__main__":
    main()
