"""A fifth, tiny agent that exists only in the tests: proof that an agent is one format module and one strategy
module, added with one registry line (``strategies.registry.register_agent``)."""
