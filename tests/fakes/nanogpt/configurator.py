"""Stand-in for nanoGPT's configurator.py: the fake train.py reads its own flags."""
