"""The one engine that starts, resumes, runs and records a plan of runs, and the series it runs:
the scheduler, the card's conditions, §6's separate records. Imports kit.sides, kit.executors,
kit.results and the packages below them.
"""
