"""CloudLab: geni-lib's aggregate API against one CloudLab site."""

from elastic.testbed.backends.cloudlab.backend import SITES, CloudLabBackend

__all__ = ["SITES", "CloudLabBackend"]
