"""Compaction strategies, one module per agent; ``registry`` builds any of them."""
