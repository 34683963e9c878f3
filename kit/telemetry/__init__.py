"""What the kit reads of the machine around the runs: the card through NVML (nvml.py alone imports
pynvml), /proc, a profile's kernel table, graph breaks, opened libraries. Imports only kit.errors.
"""
