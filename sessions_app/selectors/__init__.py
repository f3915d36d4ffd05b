"""Reads: every query the views and commands need, with a fixed number of queries each, one module per thing read.

Callers import the module that reads what they need; this package re-exports nothing.
"""
