"""CloudLab: geni-lib's aggregate API against one CloudLab site (``backend``), and the Portal
API through which an experiment's head powers its own nodes (``portal``).

Nothing is imported here: the head's virtualenv runs ``portal`` without geni-lib or lxml.
"""
