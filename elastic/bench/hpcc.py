"""HPC Challenge: how a run gets its input deck, and the parser for hpccoutf.txt's summary."""

from __future__ import annotations

from elastic.errors import PtcError

# The figures people quote from an HPCC run, with the unit of each.
HEADLINE = {
    "HPL_Tflops": "Tflop/s",
    "StarDGEMM_Gflops": "Gflop/s",
    "PTRANS_GBs": "GB/s",
    "MPIRandomAccess_GUPs": "GUP/s",
    "StarSTREAM_Triad": "GB/s",
    "MPIFFT_Gflops": "Gflop/s",
    "RandomlyOrderedRingBandwidth_GBytes": "GB/s",
    "RandomlyOrderedRingLatency_usec": "us",
}


def deck_command(prefix: str, n: int, nb: int, ranks: int) -> str:
    """The shell command that writes a run's hpccinf.txt on the cluster.

    The deck has one owner, the hpcc role: its ``hpcc-deck`` script fills the role's template
    with N, NB and the squarest P x Q grid for the ranks (the role's job script uses it too).
    """
    return f"{prefix}/hpcc-deck {int(n)} {int(nb)} {int(ranks)} > hpccinf.txt"


def parse_summary(text: str, source: str = "hpccoutf.txt") -> dict[str, float]:
    """Every key=value of the summary section, as floats (non-numeric values are dropped)."""
    begin, end = "Begin of Summary section.", "End of Summary section."
    if begin not in text or end not in text:
        raise PtcError(f"{source}: no HPCC summary section (the run did not finish)")
    section = text.split(begin, 1)[1].split(end, 1)[0]
    values: dict[str, float] = {}
    for line in section.splitlines():
        key, sep, raw = line.partition("=")
        if not sep:
            continue
        try:
            values[key.strip()] = float(raw.strip())
        except ValueError:
            continue  # e.g. VersionMajor-like strings; figures are all numeric
    missing = [k for k in HEADLINE if k not in values]
    if missing:
        raise PtcError(f"{source}: summary section lacks {', '.join(missing)}")
    # A section that could not run reports -1 for its size; its figures would read as zeros.
    sizes = ("HPL_N", "PTRANS_n", "MPIRandomAccess_N", "MPIFFT_N")
    failed = [key.rsplit("_", 1)[0] for key in sizes if values.get(key, 0) < 0]
    if failed:
        raise PtcError(f"{source}: HPCC sections did not run: {', '.join(failed)}")
    if values.get("Failure", 0) or not values.get("Success", 1):
        raise PtcError(
            f"{source}: HPCC reported a failed verification (Success={values.get('Success')})"
        )
    return values
