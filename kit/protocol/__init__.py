"""The protocol (TR-2): its TOML file loaded into typed frozen dataclasses and checked, and the
names of the files that travel beside it. The lowest layer, with kit.errors: imports only that.
"""
