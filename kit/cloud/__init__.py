"""Rented machines through SkyPilot (`micakit cloud`, the extra `micakit[cloud]`): the plan and
its prices, the fleet's launch, pull and teardown. Imports what kit.report may; only
kit/cloud/skypilot.py imports SkyPilot's `sky`.
"""
