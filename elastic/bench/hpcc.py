"""HPC Challenge: the input deck and the parser for the summary section of hpccoutf.txt."""

from __future__ import annotations

import math
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Deck:
    """The knobs of hpccinf.txt that matter for a small run; the rest are HPCC's defaults."""

    ranks: int
    n: int = 2000  # HPL problem size
    nb: int = 80  # HPL block size

    def grid(self) -> tuple[int, int]:
        """The squarest P x Q process grid with P <= Q, as HPL prefers."""
        p = math.isqrt(self.ranks)
        while self.ranks % p:
            p -= 1
        return p, self.ranks // p

    def render(self) -> str:
        p, q = self.grid()
        return "\n".join(
            [
                "HPLinpack benchmark input file",
                "ptc",
                "HPL.out      output file name (if any)",
                "8            device out (6=stdout,7=stderr,file)",
                "1            # of problems sizes (N)",
                f"{self.n}         Ns",
                "1            # of NBs",
                f"{self.nb}           NBs",
                "0            PMAP process mapping (0=Row-,1=Column-major)",
                "1            # of process grids (P x Q)",
                f"{p}            Ps",
                f"{q}            Qs",
                "16.0         threshold",
                "1            # of panel fact",
                "2            PFACTs (0=left, 1=Crout, 2=Right)",
                "1            # of recursive stopping criterium",
                "4            NBMINs (>= 1)",
                "1            # of panels in recursion",
                "2            NDIVs",
                "1            # of recursive panel fact.",
                "1            RFACTs (0=left, 1=Crout, 2=Right)",
                "1            # of broadcast",
                "1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)",
                "1            # of lookahead depth",
                "1            DEPTHs (>=0)",
                "2            SWAP (0=bin-exch,1=long,2=mix)",
                "64           swapping threshold",
                "0            L1 in (0=transposed,1=no-transposed) form",
                "0            U  in (0=transposed,1=no-transposed) form",
                "1            Equilibration (0=no,1=yes)",
                "8            memory alignment in double (> 0)",
                "##### This line (no. 32) is ignored (it serves as a separator). ######",
                # Each count line is followed by its values line, even when the count is 0.
                "0                               Number of additional problem sizes for PTRANS",
                f"{self.n}                            values of N",
                "0                               number of additional blocking sizes for PTRANS",
                f"{self.nb}                              values of NB",
                "",
            ]
        )


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
