"""docker"""
