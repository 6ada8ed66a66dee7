"""The seeds' published results beside ptc's own: one report, every number with its spread.

Each paper has a module that runs what ptc can run (simulations, a replay of active learning
on a committed dataset) or reads what a live run stored, and returns a :class:`Section`: tables
whose rows put the paper's own number (typed in, with where it is in the paper and whether it
is a mean or one run) beside ours (mean and standard deviation over job orders or seeds,
computed by the run), the difference and why. ``report`` runs them all and writes one Markdown
page and its figures. Nothing here prints; progress goes to an ``on_event`` callback.

- ``ch2``: Duplyakin's thesis Ch. 2 (downscaling: OI, FO, AP-X);
- ``part_time_cloud``: the Part-Time Cloud paper (preemption vectors, wasted cycles);
- ``mycluster``: Walker's MyCluster slides (liability-adjusted proxy migration);
- ``multiverse``: Multiverse (instant against full provisioning), from stored live results;
- ``learning``: the thesis's Ch. 6-7 (active learning, CE against VR at equal cost).
"""

from elastic.papers.table import Figure, PaperValue, Row, Section, Spread, Table

__all__ = ["Figure", "PaperValue", "Row", "Section", "Spread", "Table"]
