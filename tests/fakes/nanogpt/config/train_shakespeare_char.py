"""Stand-in for nanoGPT's config/train_shakespeare_char.py."""
