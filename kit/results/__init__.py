"""The results directory's format (D6), which every package above reads: the store and its lock, the
typed documents and run records, the plan types, the options documents, the table files, the
audit and judging of a recorded run, the readers of a run's raw files beside its logs. Imports
only kit.protocol, kit.telemetry, kit.measure, kit.errors, kit.status.
"""
