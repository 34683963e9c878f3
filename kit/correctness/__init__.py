"""§7's correctness checks: a check's plan, its runs through the engine, methods A and B, the
verdict and its plots, the gate a series passes. Imports kit.engine and the packages below it.
"""
