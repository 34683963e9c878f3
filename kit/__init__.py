"""micakit: the TR-2 measurement protocol, carried out and left behind as a results directory."""

__version__ = "0.1.0"
