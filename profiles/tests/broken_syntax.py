"""Deliberately broken: not valid Python. Used by error-reporting tests."""

import geni.portal as portal

pc = portal.Context(
request = pc.makeRequestRSpec()
