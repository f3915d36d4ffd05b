"""Benchmarks: scripts run with .venv/bin/python bench/NAME.py; bench/common.py is their shared library."""
