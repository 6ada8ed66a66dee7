"""The Part-Time Cloud paper (ScienceCloud'17, §4) beside ptc's simulator.

The paper's numbers and statements are typed in below with where they are. Fig. 3's and Fig. 4's
violins are images: the text we hold gives their captions and what §4.3 says of them, no values.
PEREGRINE (Table 1, Fig. 3 right, Fig. 4, Fig. 6) is not public; KTH-SP2 and the NREL Eagle
sample stand in, so those rows compare the paper's findings with other traces, not its numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

import pandas as pd

from elastic.papers.part_time_cloud_runs import LOG, PtcRuns, PtcSettings
from elastic.papers.table import (
    MISSING,
    Figure,
    PaperValue,
    Row,
    Section,
    Spread,
    Table,
    count_text,
    difference,
    number,
)

OWNER = "the paper's"
TABLE1 = "Table 1"
STATS = "the workload's statistics"
# (label, run column, the paper's HTC row, decimals)
HTC_TABLE1 = (
    ("jobs", "jobs", 11_200, 0),
    ("node-hours", "node_hours", 1379.05, 2),
    ("runtime mean (s)", "runtime_mean", 443.27, 2),
    ("runtime min (s)", "runtime_min", 54.0, 2),
    ("runtime 25% (s)", "runtime_q25", 84.0, 2),
    ("runtime median (s)", "runtime_q50", 106.0, 2),
    ("runtime 75% (s)", "runtime_q75", 134.25, 2),
    ("runtime max (s)", "runtime_max", 7140.0, 2),
)
PEREGRINE_TABLE1 = (
    ("jobs", "jobs", 7275, 0),
    ("node-hours", "node_hours", 26_838.58, 0),
    ("runtime mean (s)", "runtime_mean", 7119.07, 0),
    ("runtime median (s)", "runtime_q50", 1921.0, 0),
    ("runtime max (s)", "runtime_max", 85_945.0, 0),
    ("node count mean", "nodes_mean", 1.42, 2),
    ("node count max", "nodes_max", 16.0, 0),
)
SHORT_GPS = (60.0, 120.0, 1200.0, 1800.0)
LONG_GPS = (3600.0, 7200.0, 10_800.0, 14_400.0, 18_000.0, 21_600.0)
LIFO_BEATS = PaperValue(
    None,
    "LIFO wastes far less than FIFO and RANDOM",
    "§4.3, on Fig. 3 (HTC)",
    "statement; no grace period excepted",
)
SHORT_GP_BEST = PaperValue(
    None,
    "LIFO's GP 60 s and 120 s do better than the larger GPs",
    "§4.3, on Fig. 3 (HTC)",
    "statement",
)
AT_30_MIN = PaperValue(
    None,
    "not said",
    "§4.3, Fig. 3 (HTC, GP 30 min)",
    "the violins are an image; the text we hold gives no values and does not single out 30 min",
)
PAP_IS_LIFO = PaperValue(
    None, "PAP is identical to LIFO", "§3.3", "statement, for single-node workloads"
)
HTC_SAMPLES = PaperValue(14_000, "over 14K", "§4.3", "a lower bound")
SAME_NODES = PaperValue(75.0, "over 75% of samples", "§4.3 (PEREGRINE, N = 20)", "a lower bound")
ONE_NODE = PaperValue(82.0, "over 82% of jobs", "§4.3 (PEREGRINE)", "a lower bound")
STANDIN_BEATS = PaperValue(
    None, "LIFO and PAP far below FIFO and RANDOM", "§4.3, on Fig. 3 (PEREGRINE)", "statement"
)
GP_NEGLIGIBLE = PaperValue(
    None, "GP has negligible impact below 30 min", "§4.3 (PEREGRINE)", "statement"
)
FIFO_FALLS = PaperValue(
    None,
    "FIFO's and RANDOM's medians fall monotonically",
    "§4.3, Fig. 4 (PEREGRINE, GP 1-6 h)",
    "statement",
)
LIFO_FLAT = PaperValue(
    None,
    "LIFO's and PAP's medians stay constant",
    "§4.3, Fig. 4 (PEREGRINE, GP 1-6 h)",
    "statement",
)
FIG6 = "§4.4, Fig. 6 (PEREGRINE, 76 bigmem jobs at priority 10)"
PAP_PLUS = {
    "pap_plus_high": PaperValue(-82.9, "-82.9%", FIG6, "one simulation; no GP named"),
    "pap_plus_default": PaperValue(14.3, "+14.3%", FIG6, "one simulation; no GP named"),
    "pap_plus_all": PaperValue(7.5, "+7.5%", FIG6, "one simulation; no GP named"),
}
PEREGRINE_SAMPLES = PaperValue(168_000, "168K", "§4.3", "per policy-GP pair")


def _medians(ptc: PtcRuns, workload: str, shuffled: bool) -> pd.DataFrame:
    """Median WC (node-hours): one row per order, one column per (policy, GP)."""
    m = ptc.medians[ptc.medians.workload == workload]
    m = m[(m.order != LOG) if shuffled else (m.order == LOG)]
    return m.pivot_table(index="order", columns=["policy", "gp_s"], values="median_h")


def _runs(ptc: PtcRuns, workload: str, shuffled: bool) -> pd.DataFrame:
    r = ptc.runs[ptc.runs.workload == workload]
    return r[(r.order != LOG) if shuffled else (r.order == LOG)]


def _policy_text(wide: pd.DataFrame, gp: float, policies: tuple[str, ...]) -> str:
    return ", ".join(f"{p} {Spread.of(wide[(p, gp)]).text(2)}" for p in policies)


def _hits(wide: pd.DataFrame, test: Callable[[pd.Series], bool]) -> tuple[int, int]:
    return sum(bool(test(r)) for _, r in wide.iterrows()), len(wide)


def _lifo_below(gp: float) -> Callable[[pd.Series], bool]:
    def test(r: pd.Series) -> bool:
        return bool(r[("LIFO", gp)] < min(r[("FIFO", gp)], r[("RANDOM", gp)]))

    return test


def _htc_table(ptc: PtcRuns, settings: PtcSettings) -> Table:
    runs = _runs(ptc, "HTC", True)
    wide = _medians(ptc, "HTC", True)
    rows: list[Row] = []
    for label, column, value, digits in HTC_TABLE1:
        ours = Spread.of(runs[column])
        rows.append(
            Row(
                f"HTC: {label}",
                PaperValue(value, number(value, digits), TABLE1, STATS),
                (ours.text(digits),),
                difference(ours.mean, value, digits),
                "The paper's own trace, ten shuffled copies: the statistics do not "
                "depend on the order.",
            )
        )
    samples = Spread.of(runs["samples"])
    rows.append(
        Row(
            "HTC: snapshots (preemption samples)",
            HTC_SAMPLES,
            (samples.text(0),),
            difference(samples.mean, HTC_SAMPLES.value, 0),
            "A snapshot at every completion and every 30 s (§4); the paper gives only "
            "a lower bound.",
        )
    )
    trio = ("LIFO", "FIFO", "RANDOM")
    for gp in SHORT_GPS:
        hits, total = _hits(wide, _lifo_below(gp))
        why = (
            "LIFO's victims are the jobs that started last, which have run little."
            if hits == total
            else "A likely reason for the reversal: short jobs finish within such a GP whoever "
            "picks them; LIFO's long victims have just started and lose the whole GP, while "
            "FIFO's have run for a while and more often finish."
        )
        rows.append(
            Row(
                f"HTC, GP {gp / 60:g} min: LIFO's median WC below FIFO's and RANDOM's",
                LIFO_BEATS,
                (f"{_policy_text(wide, gp, trio)} node-h; {count_text(hits, total)} seeds",),
                MISSING,
                why,
            )
        )
    hits, total = _hits(
        wide,
        lambda r: (
            max(r[("LIFO", 60.0)], r[("LIFO", 120.0)])
            < min(r[("LIFO", 1200.0)], r[("LIFO", 1800.0)])
        ),
    )
    lifo = ", ".join(f"{g / 60:g} min {Spread.of(wide[('LIFO', g)]).text(2)}" for g in SHORT_GPS)
    rows.append(
        Row(
            "HTC: LIFO's GP 1 and 2 min against 20 and 30 min",
            SHORT_GP_BEST,
            (f"LIFO {lifo} node-h; {count_text(hits, total)} seeds",),
            MISSING,
            "As the paper explains: long jobs killed soon after they start lose their whole GP.",
        )
    )
    hits, total = _hits(
        wide, lambda r: r[("LIFO", 1800.0)] > max(r[("FIFO", 1800.0)], r[("RANDOM", 1800.0)])
    )
    rows.append(
        Row(
            "HTC, GP 30 min: LIFO wastes more than FIFO and RANDOM",
            AT_30_MIN,
            (f"{_policy_text(wide, 1800.0, trio)} node-h; {count_text(hits, total)} seeds",),
            MISSING,
            f"Ours: yes in {hits} of {total} seeds. The paper's text says LIFO wastes "
            "less for HTC and excepts no GP; whether its Fig. 3 shows LIFO above the "
            "others at 30 min cannot be read from the text.",
        )
    )
    same = runs["lifo_equals_pap"].astype(bool)
    rows.append(
        Row(
            "HTC: PAP against LIFO",
            PAP_IS_LIFO,
            (f"identical WC in every sample: {count_text(int(same.sum()), len(same))} seeds",),
            MISSING,
            "Every HTC job uses one node.",
        )
    )
    return Table(
        "The Part-Time Cloud paper: the HTC workload (N = 20, P = 10)",
        OWNER,
        (f"ours: mean ± sd over {settings.seeds} seeds (the ten shuffled copies)",),
        tuple(rows),
        notes=("WC: median wasted cycles per preemption, node-hours.",),
    )


def _columns(ptc: PtcRuns, settings: PtcSettings) -> list[tuple[str, str, bool]]:
    """(header, workload, shuffled) for each stand-in column there are runs for."""
    cols = [
        ("ours: KTH-SP2, log order (one run)", "KTH-SP2", False),
        ("ours: Eagle sample, log order (one run)", "Eagle", False),
        (f"ours: Eagle sample, mean ± sd over {settings.seeds} shuffled orders", "Eagle", True),
    ]
    if settings.kth_orders:
        cols.insert(
            1,
            (
                f"ours: KTH-SP2, mean ± sd over {settings.kth_orders} shuffled orders",
                "KTH-SP2",
                True,
            ),
        )
    return cols


def _standin_table(ptc: PtcRuns, settings: PtcSettings) -> Table:
    cols = _columns(ptc, settings)
    rows: list[Row] = []

    def numeric(
        quantity: str, paper: PaperValue, column: str, scale: float, digits: int, why: str
    ) -> None:
        cells, diffs = [], []
        for _, workload, shuffled in cols:
            s = Spread.of(v * scale for v in _runs(ptc, workload, shuffled)[column])
            cells.append(s.text(digits))
            diffs.append(difference(s.mean, paper.value, digits, relative=False))
        rows.append(Row(quantity, paper, tuple(cells), "; ".join(diffs), why))

    def statement(
        quantity: str, paper: PaperValue, test: Callable[[pd.DataFrame], str], why: str
    ) -> None:
        cells = [test(_medians(ptc, w, s)) for _, w, s in cols]
        rows.append(Row(quantity, paper, tuple(cells), MISSING, why))

    for label, column, value, digits in PEREGRINE_TABLE1:
        numeric(
            f"{label}",
            PaperValue(value, number(value, digits), f"{TABLE1} (PEREGRINE)", STATS),
            column,
            1.0,
            0 if digits == 0 else digits,
            "Another trace: PEREGRINE is not public. Both stand-ins are filtered as the "
            "paper filtered PEREGRINE (at most N nodes, at most 24 h, completed).",
        )
    numeric(
        "snapshots (preemption samples)",
        PEREGRINE_SAMPLES,
        "samples",
        1.0,
        0,
        "Longer workloads give more snapshots.",
    )
    numeric(
        "jobs on one node (%)",
        ONE_NODE,
        "single_node_share",
        100.0,
        1,
        "PAP ranks by elapsed x nodes, LIFO by elapsed: the more one-node jobs, the more "
        "alike they pick.",
    )
    numeric(
        "LIFO and PAP preempt the same nodes (% of samples)",
        SAME_NODES,
        "same_lifo_pap",
        100.0,
        1,
        "Follows from the share of one-node jobs, row above.",
    )

    def below(wide: pd.DataFrame, gp: float = 60.0) -> str:
        hits, total = _hits(
            wide,
            lambda r: (
                max(r[("LIFO", gp)], r[("PAP", gp)]) < min(r[("FIFO", gp)], r[("RANDOM", gp)])
            ),
        )
        text = _policy_text(wide, gp, ("LIFO", "PAP", "FIFO", "RANDOM"))
        return f"{text} node-h; {count_text(hits, total)}"

    statement(
        "GP 1 min: LIFO and PAP below FIFO and RANDOM",
        STANDIN_BEATS,
        below,
        "Median WC per preemption at GP 60 s.",
    )

    def flat_short(wide: pd.DataFrame) -> str:
        change = Spread.of(100 * (wide[("LIFO", 1800.0)] / wide[("LIFO", 60.0)] - 1))
        return f"LIFO's median, GP 1 → 30 min: {change.text(1)}%"

    statement(
        "GP below 30 min",
        GP_NEGLIGIBLE,
        flat_short,
        "Jobs that run for hours rarely finish within a short GP.",
    )

    def falls(wide: pd.DataFrame) -> str:
        def test(r: pd.Series) -> bool:
            return all(
                all(r[(p, a)] >= r[(p, b)] for a, b in pairwise(LONG_GPS))
                for p in ("FIFO", "RANDOM")
            )

        hits, total = _hits(wide, test)
        ends = ", ".join(
            f"{p} {Spread.of(wide[(p, LONG_GPS[0])]).text(1)} → "
            f"{Spread.of(wide[(p, LONG_GPS[-1])]).text(1)}"
            for p in ("FIFO", "RANDOM")
        )
        return f"{ends} node-h; {count_text(hits, total)}"

    statement(
        "GP 1-6 h: FIFO and RANDOM", FIFO_FALLS, falls, "More jobs finish within a longer GP."
    )

    def flat_long(wide: pd.DataFrame) -> str:
        return (
            "; ".join(
                f"{p} " + ", ".join(number(Spread.of(wide[(p, g)]).mean, 1) for g in LONG_GPS)
                for p in ("LIFO", "PAP")
            )
            + " node-h at 1, 2, ..., 6 h"
        )

    statement(
        "GP 1-6 h: LIFO and PAP",
        LIFO_FLAT,
        flat_long,
        "Once the GP exceeds most of a trace's runtimes, WC falls to zero whatever the "
        "policy (the paper says so too); the stand-ins' runtimes are shorter than "
        "PEREGRINE's.",
    )
    wide = "; ".join(
        f"{w} {Spread.of(100 * v for v in _runs(ptc, w, sh)['high_wide_share']).text(0)}%"
        for _, w, sh in cols
    )
    for column, label in (
        ("pap_plus_high", "high-priority jobs"),
        ("pap_plus_default", "default jobs"),
        ("pap_plus_all", "all jobs"),
    ):
        numeric(
            f"PAP+ against PAP, cumulative WC of {label} (%), GP {settings.pap_plus_gp / 60:g} min",
            PAP_PLUS[column],
            column,
            100.0,
            1,
            "High class: Eagle's three rare partitions (about 1% of its jobs), a random 1% "
            "of KTH-SP2's; PEREGRINE's was 76 bigmem jobs. No vector can spare a job wider "
            f"than N - P = {settings.nodes - settings.preempt} nodes, and such jobs hold this "
            f"share of the high class's node-hours, per column: {wide}.",
        )

    return Table(
        "The Part-Time Cloud paper: PEREGRINE's findings on the stand-ins (N = 20, P = 10)",
        OWNER,
        tuple(h for h, _, _ in cols),
        tuple(rows),
        notes=(
            "PEREGRINE is not public: these rows hold the paper's findings against two other "
            "traces, not its numbers. Differences: ours minus the paper's, per column, in "
            "points.",
        ),
    )


def section(ptc: PtcRuns, settings: PtcSettings, figure: str) -> Section:
    return Section(
        "The Part-Time Cloud paper: preemption vectors and wasted cycles",
        (
            "The paper's evaluation (§4): the whole workload queued at once, FCFS with EASY "
            f"backfilling on N = {settings.nodes} nodes, a snapshot at every completion and "
            f"every 30 s, the P = {settings.preempt} lowest-valued nodes preempted in each, "
            "wasted cycles counted per policy and grace period (GP).",
            "HTC is the paper's own workload (ten shuffled copies of the 1,120-job trace); each "
            "seed draws the copies and the 1% of high-priority jobs. **PEREGRINE, the paper's "
            "second trace (Table 1, Fig. 3, Fig. 4, Fig. 6), is not public.** KTH-SP2 (the "
            "Parallel Workloads Archive's log) and a 1,000-job sample of NREL's Eagle stand in "
            "for it, filtered as the paper filtered PEREGRINE.",
        ),
        (_htc_table(ptc, settings), _standin_table(ptc, settings)),
        (
            Figure(
                figure,
                "Part-Time Cloud: median wasted cycles per preemption by GP "
                "(HTC: mean ± sd over seeds; stand-ins: their logs' order)",
            ),
        ),
    )
