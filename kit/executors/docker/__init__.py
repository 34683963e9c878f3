"""The Docker executor, its images, builds, registries and footprints: the one package that imports
docker. Imports what kit.executors may.
"""
