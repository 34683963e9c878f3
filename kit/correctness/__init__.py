"""correctness"""
