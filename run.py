"""The kit's entry point: `python run.py ...` is `micakit ...`."""

from kit.cli.main import main

if __name__ == "__main__":
    main()
