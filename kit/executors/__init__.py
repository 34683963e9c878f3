"""Where a run runs, behind one interface: a local process, or a Docker container (docker/), and the
kit's small programs shipped to a run. Imports kit.results and the packages below it.
"""
