"""Profiles to RSpecs: a geni-lib profile run the way the CloudLab portal runs it (``render``,
``portal_runner``, with geni-lib's Python 3 defects fixed in ``genilib_compat``), GENI v3
request and manifest RSpecs (``rspec``), and the testbed-neutral model both parse into
(``topology``). The floor of the testbed stack: it imports no other subpackage of ``elastic``."""
