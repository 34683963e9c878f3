"""The outside clock (§5): output lines stamped as they leave a program, and step time, loss and a
run's outcome computed from them. Imports kit.protocol, kit.status and kit.errors.
"""
