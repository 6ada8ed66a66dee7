"""ptc: the Part-Time Cloud toolkit."""

__version__ = "0.1.0"
