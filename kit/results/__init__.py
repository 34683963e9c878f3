"""The results directory's format (D6), which every package above reads: the store and its lock, the
typed documents and run records, the plan types, the options documents, the table files, the
audit and judging of a recorded run. Imports only kit.protocol, kit.measure, kit.errors, kit.status.
"""
