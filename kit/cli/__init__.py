"""The `micakit` commands: click's parsing, a series assembled from its options, progress on stderr.
The top layer: may import any package of the kit, and none imports it.
"""
