"""Stand-in for nanoGPT's model.py: the fake train.py builds no model."""
