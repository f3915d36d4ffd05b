"""Pure-Python core of Session Inspector: session formats, token accounting and compaction strategies.

Nothing in this package imports Django; ``sessions_app`` is the thin shell around it.
"""
