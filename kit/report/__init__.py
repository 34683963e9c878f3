"""What a results directory publishes, recomputed from its raw files: tables, Markdown and HTML,
publication, merge, compare, rerun.sh. Imports kit.correctness and the packages below it.
"""
