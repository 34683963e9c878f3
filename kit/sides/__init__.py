"""The two sides of a comparison (nanoGPT under PyTorch, the contender): how a configuration's run
is started, nanoGPT's source and data, and the versions each side reports. Imports kit.executors,
kit.results and the packages below them.
"""
