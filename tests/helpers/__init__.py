"""Helpers shared by test modules (builders, sample sets, worker and run helpers): test modules import these,
never one another. Fixtures live in the conftest.py files."""
