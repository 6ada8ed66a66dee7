"""Deliberately broken: Python refuses to compile it. Used by error-reporting tests.

(`return` outside a function is a SyntaxError at compile time; the noqa only keeps the
linter from reporting the mistake this file exists to make.)
"""

import geni.portal as portal

pc = portal.Context()
request = pc.makeRequestRSpec()
return request  # noqa: F706
