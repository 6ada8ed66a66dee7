"""`ptc elastic`: the elastic manager of an experiment from the command line (status, reclaim,
acquire, release, events), lending pool machines to another experiment (acquire --into,
release), reconciling the manager's pool with the testbed (reconcile), where resumed jobs'
waits went (overhead, :mod:`elastic.slurm.overhead`), a round of multi-site rebalancing
on the controller (rebalance, :mod:`elastic.slurm.workstation`), who used, lost and lent
what (ledger, :mod:`elastic.ledger`), and the pool's live page (ui,
:mod:`elastic.manager.page_proxy`).

``ptc elastic status NAME`` finds the manager in the experiment (the first ``config_server``
host), reads the token it needs over SSH and talks to the manager through an SSH forward
(:mod:`elastic.manager.workstation`): the admin token for status, events and reclaim, the
partition's own token for the reference client's acquire and release. ``--url`` with
``--token-file`` (or PTC_ELASTIC_URL and PTC_ELASTIC_TOKEN_FILE) talk to a manager directly
instead, verifying its certificate against PTC_ELASTIC_CA (the cluster's CA).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from elastic.cli import testbed as testbed_cli
from elastic.errors import InputError, PtcError
from elastic.manager.client import ManagerClient, ReferenceClient, read_token
from elastic.policies import DEFAULT_DOWNSCALING_POLICY
from elastic.testbed import backends
from elastic.testbed import experiment as experiments
from elastic.testbed.backends.local import provisioning

app = typer.Typer(no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

Name = Annotated[str | None, typer.Argument(help="experiment name")]
Url = Annotated[
    str | None,
    typer.Option(
        "--url", envvar="PTC_ELASTIC_URL", help="talk to this manager, https://ADDRESS:PORT"
    ),
]
TokenFile = Annotated[
    Path | None,
    typer.Option(
        "--token-file",
        envvar="PTC_ELASTIC_TOKEN_FILE",
        help="with --url: file holding the admin's or a partition's token",
    ),
]


@contextlib.contextmanager
def connect(
    name: str | None, url: str | None, token_file: Path | None, partition: str | None = None
) -> Iterator[ManagerClient]:
    """The manager of experiment ``name`` (as the admin, or as ``partition``), or the one at
    ``url`` with the token in ``token_file``."""
    if url is not None:
        if token_file is None:
            raise InputError("--token-file: missing (the admin token or the partition's token)")
        ca = os.environ.get("PTC_ELASTIC_CA")  # the cluster's CA; else the system's CAs
        yield ManagerClient(url, read_token(token_file), ca=Path(ca) if ca else None)
        return
    if name is None:
        raise InputError("NAME: missing (the experiment), or give --url and --token-file")
    from elastic.manager.workstation import open_manager
    from elastic.testbed import experiment as experiments

    exp = experiments.load(name)
    with open_manager(exp.inventory_path, exp.ssh_config_path, partition) as client:
        yield client


def _slurm_states(name: str | None, url: str | None) -> dict[str, str]:
    if url is not None or name is None:
        return {}
    from elastic.manager.workstation import slurm_states
    from elastic.testbed import experiment as experiments

    exp = experiments.load(name)
    try:
        return slurm_states(exp.inventory_path, exp.ssh_config_path)
    except PtcError as err:
        err_console.print(f"[yellow]Slurm states unavailable: {err}[/]")
        return {}


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")


@app.command("status")
def status(name: Name = None, url: Url = None, token_file: TokenFile = None) -> None:
    """The pool, each node's owner and Slurm state, the partitions with their last PV (and
    its age), and pending reclamations."""
    with connect(name, url, token_file) as manager:
        st = manager.status()
    slurm = _slurm_states(name, url)
    nodes = Table(title="pool")
    for column in ("node", "owner", "state", "Slurm", "cpus", "memory MB", "features"):
        nodes.add_column(column)
    for n in st["nodes"]:
        nodes.add_row(
            n["name"],
            n["owner"] or "-",
            n["state"],
            slurm.get(n["name"], "-"),
            str(n["cpus"]),
            str(n["memory_mb"]),
            ",".join(n["features"]),
        )
    console.print(nodes)
    parts = Table(title="partitions")
    for column in ("partition", "nodes", "PV policy", "PV age", "PV", "resumes", "repairs"):
        parts.add_column(column)
    for p in st["partitions"]:
        pv = p["pv"]
        age = "-" if pv is None else f"{pv['age']:.0f} s" + (" (stale)" if pv["stale"] else "")
        values = "-" if pv is None else " ".join(f"{k}={v:.2f}" for k, v in pv["values"].items())
        parts.add_row(
            p["name"],
            ",".join(p["nodes"]) or "-",
            (pv or {}).get("policy") or "-",
            age,
            values,
            _resumes(p.get("protection") or {}),
            _repairs(p.get("repairs") or {}),
        )
    console.print(parts)
    for p in st["partitions"]:
        guard = p.get("protection") or {}
        if guard.get("protected"):
            err_console.print(
                f"[red]partition {p['name']} is in protected mode since "
                f"{_when(guard['since'])} UTC: {guard['reason']}[/]\n"
                f"  its jobs wait; end it with: ptc elastic unprotect {name or 'NAME'} "
                f"--partition {p['name']}"
            )
    if st["reclamations"]:
        recs = Table(title="pending reclamations")
        for column in ("id", "partition", "for", "nodes", "outstanding", "deadline", "left"):
            recs.add_column(column)
        for r in st["reclamations"]:
            outstanding = [
                n for n in r["chosen"] if n not in r["released"] and n not in r["forced"]
            ]
            recs.add_row(
                r["id"],
                r["partition"],
                r["beneficiary"] or "pool",
                ",".join(r["chosen"]),
                ",".join(outstanding),
                _when(r["deadline"]),
                f"{max(r['remaining'], 0):.0f} s",
            )
        console.print(recs)
    else:
        console.print("no pending reclamation")
    if name is not None and url is None and _on_local_testbed(name):
        testbed_cli.print_provisioning(
            provisioning.limits(), provisioning.snapshot(), experiment=name
        )


def _resumes(guard: dict[str, Any]) -> str:
    """A partition's resumes: going ahead (with failures in a row), or protected since when."""
    if guard.get("protected"):
        return f"[red]protected since {_when(guard['since'])}[/]"
    failures = int(guard.get("failures") or 0)
    return f"go ahead ({failures} failed in a row)" if failures else "go ahead"


def _repairs(records: dict[str, Any]) -> str:
    """The repair loop's work on a partition: nodes it mends now, those backing off after a
    failed repair (until when), and how many it brought back in all."""
    now = [n for n, r in records.items() if r.get("active")]
    waiting = [
        f"{n} failed {r['failures']}x, next {_when(r['not_before'])}"
        for n, r in records.items()
        if not r.get("active") and r.get("failures")
    ]
    done = sum(int(r.get("repaired") or 0) for r in records.values())
    parts = [f"mending {', '.join(now)}"] if now else []
    parts += waiting
    parts.append(f"{done} repaired")
    return "; ".join(parts)


@app.command("unprotect")
def unprotect(
    name: Name = None,
    partition: Annotated[str, typer.Option("--partition")] = "slurm",
    url: Url = None,
    token_file: TokenFile = None,
) -> None:
    """End PARTITION's protected mode (admin): its resumes go ahead again, and its Slurm
    client puts the Slurm partitions it put DOWN back UP within its sync interval."""
    with connect(name, url, token_file) as manager:
        was = manager.unprotect(partition)
    if was:
        console.print(f"partition {partition}: protected mode ended; its resumes go ahead")
    else:
        console.print(f"partition {partition} was not in protected mode; nothing changed")


@app.command("overhead")
def overhead_cmd(
    name: Annotated[str, typer.Argument(help="experiment name")],
    out: Annotated[Path, typer.Option("--out", help="directory for the dataset and its plot")],
    since: Annotated[
        float, typer.Option("--since", help="only jobs that started after this time (epoch s)")
    ] = 0.0,
) -> None:
    """Where resumed jobs' waits went: for every node a job waited for, the parts from submit
    to start (Slurm, manager, provisioning slot, testbed, network and SSH, playbook, slurmd
    registration, Slurm again), as OUT/overhead.parquet (+ .csv, .columns.json) and
    OUT/overhead.png."""
    # pandas and the plots only here: every other elastic command starts in a fraction of it
    import pandas as pd

    from elastic.bench import dataset, plot
    from elastic.slurm import overhead

    exp = experiments.load(name)
    provisions = provisioning.history(since) if _on_local_testbed(name) else []
    found = overhead.collect(exp.inventory_path, exp.ssh_config_path, provisions, since=since)
    if not found:
        raise InputError(
            f"experiment {name!r}: no job since {since:.0f} waited for a resumed node "
            "(submit one to a powered-down pool, then ask again)"
        )
    frame = pd.DataFrame(found)
    out.mkdir(parents=True, exist_ok=True)
    dataset.write(out / "overhead.parquet", frame, overhead.COLUMNS)
    labels = frame["job_id"].astype(str) + " " + frame["node"].astype(str)
    plot.stacked_parts(
        frame.assign(row=labels),
        overhead.PARTS,
        out / "overhead.png",
        label="row",
        title=f"{name}: from submit to start, per job and node",
    )
    table = Table(title=f"{name}: overhead of {len(frame)} provisioned nodes (median, s)")
    table.add_column("part")
    table.add_column("median s", justify="right")
    table.add_column("max s", justify="right")
    for column in [*overhead.PARTS, "submit_to_start_s", "unaccounted_s"]:
        table.add_row(column, f"{frame[column].median():.1f}", f"{frame[column].max():.1f}")
    console.print(table)
    console.print(f"dataset {out / 'overhead.parquet'}; plot {out / 'overhead.png'}")


@app.command("rebalance")
def rebalance_cmd(
    name: Annotated[str, typer.Argument(help="experiment name")],
    sites: Annotated[
        Path | None,
        typer.Option(
            "--sites",
            help="sites file (YAML): each site's name, price, desired count, nodes; "
            "default: the head's current one (the deploy's or the last round's)",
        ),
    ] = None,
    policy: Annotated[
        str, typer.Option("--policy", help="OI, FO or AP-X (e.g. AP-25)")
    ] = DEFAULT_DOWNSCALING_POLICY,
    as_json: Annotated[bool, typer.Option("--json", help="the round's report as JSON")] = False,
) -> None:
    """One round of multi-site rebalancing (the thesis's Ch. 2 downscaling) on the
    experiment's Slurm controller: the policy drains, requeues and powers down the excess on
    dear sites and undrains where nodes are wanted. The round's report, with each
    reclamation's excess cost and discarded work, is printed and appended to the head's
    rebalance log; a sites file the round refuses leaves the head's current one in place."""
    from elastic.slurm import workstation

    exp = experiments.load(name)
    report = workstation.rebalance(exp.inventory_path, exp.ssh_config_path, sites, policy)
    if as_json:
        print(json.dumps(report, sort_keys=True))
        return
    table = Table(title=f"{name}: {report['policy']} round, live nodes before it per site")
    table.add_column("site")
    table.add_column("live", justify="right")
    table.add_column("launch", justify="right")
    for site, live in report["live_before"].items():
        table.add_row(site, str(live), str(report["launch"].get(site, 0)))
    console.print(table)
    if report["terminated"]:
        killed = Table(title="terminated (drained, job requeued, powered down)")
        for column in ("node", "site", "job", "discarded s", "excess cost"):
            killed.add_column(column)
        for r in report["terminated"]:
            killed.add_row(
                r["node"],
                r["site"],
                str(r.get("job_id") or "-"),
                f"{r['discarded_s']:.0f}",
                f"{r['excess_cost']:g}",
            )
        console.print(killed)
    for label, key in (
        ("drained", "drained"),
        ("undrained", "undrained"),
        ("requeued", "requeued"),
    ):
        if report[key]:
            console.print(f"{label}: {', '.join(report[key])}")
    console.print(
        f"excess cost {report['excess_cost']:g}, discarded work {report['discarded_s']:.0f} s"
    )


@app.command("ledger")
def ledger_cmd(
    name: Annotated[str, typer.Argument(help="experiment name")],
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="the period's start: epoch seconds, an ISO date or time (UTC unless it says), "
            "or a time ago (45m, 2h, 3d); default: everything",
        ),
    ] = None,
    by: Annotated[str, typer.Option("--by", help="job, user, site or experiment")] = "job",
    as_json: Annotated[bool, typer.Option("--json", help="the whole ledger as JSON")] = False,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="write the ledger's datasets (Parquet) and a plot here"),
    ] = None,
    sites: Annotated[
        Path | None,
        typer.Option("--sites", help="sites file (YAML); default: the head's current one"),
    ] = None,
    price: Annotated[
        float, typer.Option("--price", help="price per node-hour of the local site")
    ] = 0.0,
    round_hours: Annotated[
        bool,
        typer.Option("--round-hours", help="bill each node's hold by started hours"),
    ] = False,
) -> None:
    """Who used, lost and lent what: node-hours used and lost to reclamations per job and
    user (from sacct), node-hours lent to other experiments (from the manager's event log),
    and instance-hours and cost per site."""
    import time

    from elastic.ledger import fetch, period, records
    from elastic.testbed.loans import LoanBook

    if by not in records.BY:  # before anything is read
        raise InputError(f"--by {by!r}: not one of {', '.join(records.BY)}")
    until = time.time()
    start = 0.0 if since is None else period.parse_since(since, until)
    exp = experiments.load(name)
    lent = {n: loan.other for n, loan in LoanBook(exp.loans_path).all().items()}
    ledger = fetch.collect(
        name,
        fetch.Cluster(exp.inventory_path, exp.ssh_config_path),
        start,
        until,
        sites_file=sites,
        local_price=price,
        borrowers=lent,
        round_hours=round_hours,
    )
    written = []
    if out is not None:
        from elastic.ledger import frames  # pandas and matplotlib only here

        written = frames.write(ledger, by, out)
    if as_json:
        print(json.dumps(ledger.to_json(by), sort_keys=True))
        return
    _draw_ledger(ledger, by)
    if written:
        console.print("written: " + ", ".join(str(p) for p in written))


# column of a summary row -> (heading, format)
_LEDGER_COLUMNS = {
    "job_id": ("job", "{}"),
    "user": ("user", "{}"),
    "site": ("site", "{}"),
    "experiment": ("experiment", "{}"),
    "jobs": ("jobs", "{}"),
    "runs": ("runs", "{}"),
    "state": ("last state", "{}"),
    "price": ("price/node-h", "{:g}"),
    "instance_h": ("instance-h", "{:.3f}"),
    "cost": ("cost", "{:.2f}"),
    "used_node_h": ("used node-h", "{:.3f}"),
    "lost_node_h": ("lost node-h", "{:.3f}"),
    "lent_node_h": ("lent node-h", "{:.3f}"),
    "borrowed_node_h": ("borrowed node-h", "{:.3f}"),
    "reclamations": ("killed by", "{}"),
}


def _draw_ledger(ledger: Any, by: str) -> None:
    from elastic.ledger import records

    rows = records.summarise(ledger, by)
    totals = ledger.totals()
    table = Table(
        title=f"{ledger.experiment}: ledger by {by}, {_day(ledger.since)} to "
        f"{_day(ledger.until)} UTC" + (" (cost per started hour)" if ledger.round_hours else "")
    )
    shown = [c for c in _LEDGER_COLUMNS if rows and c in rows[0]]
    for column in shown:
        heading, _ = _LEDGER_COLUMNS[column]
        table.add_column(heading, justify="left" if _LEDGER_COLUMNS[column][1] == "{}" else "right")
    for row in rows:
        table.add_row(*(_LEDGER_COLUMNS[c][1].format(row[c]) for c in shown))
    console.print(table)
    console.print(
        f"total: {totals['jobs']} jobs, {totals['runs']} runs; used "
        f"{totals['used_node_h']:.3f} node-h ({totals['used_node_s']} node-s), lost "
        f"{totals['lost_node_h']:.3f}, lent {totals['lent_node_h']:.3f}; instances "
        f"{totals['instance_h']:.3f} h, cost {totals['cost']:.2f}"
    )


def _day(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")


def _on_local_testbed(name: str) -> bool:
    """The experiment's nodes are the local testbed's, whose provisioning queue ptc can read."""
    if not experiments.exists(name):
        return False
    exp = experiments.load(name)
    return backends.capabilities(exp.testbed).host_machines and not exp.adopted


@app.command("reclaim")
def reclaim(
    name: Name = None,
    count: Annotated[int, typer.Option("--count", help="P: nodes to reclaim")] = 1,
    grace: Annotated[float, typer.Option("--grace", help="grace period, seconds")] = 60.0,
    partition: Annotated[str, typer.Option("--partition")] = "slurm",
    url: Url = None,
    token_file: TokenFile = None,
) -> None:
    """Host-driven downscaling: take COUNT nodes from PARTITION after GRACE seconds (admin)."""
    with connect(name, url, token_file) as manager:
        rec = manager.reclaim(partition, count, grace)
    console.print(
        f"reclamation {rec['id']}: {', '.join(rec['chosen'])} of {partition} "
        f"({rec['policy'] or 'no'} policy), deadline {_when(rec['deadline'])} UTC"
    )


@app.command("acquire")
def acquire(
    name: Name = None,
    count: Annotated[int, typer.Option("--count", help="nodes to acquire")] = 1,
    grace: Annotated[
        float | None,
        typer.Option("--grace", help="reclaim a shortfall from other partitions with this GP"),
    ] = None,
    partition: Annotated[str, typer.Option("--partition", help="the reference client's")] = "ref",
    feature: Annotated[list[str] | None, typer.Option("--feature", help="required feature")] = None,
    wait: Annotated[
        float | None,
        typer.Option(
            "--wait", help="seconds to wait for reclaimed nodes (with --into: GP + 180 s)"
        ),
    ] = None,
    into: Annotated[
        str | None,
        typer.Option("--into", help="lend the nodes to this experiment: they leave NAME's"),
    ] = None,
    as_names: Annotated[
        list[str] | None,
        typer.Option("--as", help="with --into: the node's name there (default lent-NODE)"),
    ] = None,
    url: Url = None,
    token_file: TokenFile = None,
) -> None:
    """The reference client: acquire COUNT nodes for PARTITION; with --into, lend them to
    another experiment, where each becomes a node of its own."""
    if into is not None:
        _lend(name, into, count, grace, wait, as_names or [], partition, feature, url)
        return
    if as_names:
        raise InputError("--as: only with --into")
    with connect(name, url, token_file, partition) as manager:
        got = ReferenceClient(manager, partition).acquire(
            count, grace=grace, features=feature or (), wait=wait or 0.0
        )
    console.print(f"{partition}: got {', '.join(got.added) or 'no node'} from the pool")
    if got.reclamations:
        console.print(f"reclaiming for {partition}: {', '.join(got.reclamations)}")
    console.print(f"{partition} holds {', '.join(got.nodes) or 'nothing'}")
    if not got.complete:
        err_console.print("[yellow]the reclaimed nodes have not all arrived yet[/]")


def _lend(
    name: str | None,
    into: str,
    count: int,
    grace: float | None,
    wait: float | None,
    names: list[str],
    partition: str,
    feature: list[str] | None,
    url: str | None,
) -> None:
    from elastic.cli import draw
    from elastic.lending import live, loan
    from elastic.lending.ports import REFERENCE
    from elastic.testbed import experiment as experiments
    from elastic.testbed.loans import LoanBook

    if name is None or url is not None:
        raise InputError("--into: name the lending experiment (not --url)")
    if partition != REFERENCE or feature:
        raise InputError(f"--into: lends through partition {REFERENCE}, without --feature")
    exp = experiments.load(name)
    with draw.progress(err_console) as on_event:
        loans = loan.lend(
            live.ManagerPool(exp),
            live.LiveTestbed(on_event),
            LoanBook(exp.loans_path),
            name,
            into,
            count,
            grace=grace,
            wait=wait if wait is not None else (grace or 0.0) + 180.0,
            names=names,
            on_event=on_event,
        )
    for lent in loans:
        console.print(f"{name}: {lent.node} lent to {lent.other} as {lent.name}")
        console.print(f"  run on it: ptc run {lent.other} {lent.name} -- CMD")


@app.command("release")
def release(
    name: Annotated[str, typer.Argument(help="experiment name")],
    nodes: Annotated[list[str], typer.Argument(help="nodes to give back")],
    partition: Annotated[str, typer.Option("--partition")] = "ref",
    url: Url = None,
    token_file: TokenFile = None,
) -> None:
    """The reference client: give NODES back to the pool. A lent node leaves the experiment it
    was lent to, comes back to NAME with a fresh disk, is deployed, then released."""
    lent = _lent(name, url)
    if given := [n for n in nodes if n in lent]:
        from elastic.cli import draw
        from elastic.lending import live, loan
        from elastic.testbed import experiment as experiments
        from elastic.testbed.loans import LoanBook

        exp = experiments.load(name)
        with draw.progress(err_console) as on_event:
            for node in given:
                back = loan.give_back(
                    live.ManagerPool(exp),
                    live.LiveTestbed(on_event),
                    LoanBook(exp.loans_path),
                    name,
                    node,
                    on_event,
                )
                console.print(f"{name}: {node} is back (was {back.other}/{back.name})")
    if rest := [n for n in nodes if n not in lent]:
        with connect(name, url, token_file, partition) as manager:
            released = ReferenceClient(manager, partition).release(rest)
        console.print(f"{partition}: released {', '.join(released)}")


def _lent(name: str, url: str | None) -> set[str]:
    if url is not None:
        return set()
    from elastic.testbed import experiment as experiments
    from elastic.testbed.loans import LoanBook

    if not experiments.exists(name):
        return set()
    return set(LoanBook(experiments.load(name).loans_path).all())


@app.command("reconcile")
def reconcile(
    name: Annotated[str, typer.Argument(help="experiment name")],
    repair: Annotated[bool, typer.Option("--repair", help="fix each disagreement")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document on stdout")] = False,
) -> None:
    """Compare the manager's pool with the testbed and the loans; name every disagreement.
    Exit status 1 when some are found and not repaired."""
    from elastic.cli import draw
    from elastic.lending import live
    from elastic.lending import reconcile as rec
    from elastic.testbed import experiment as experiments
    from elastic.testbed.loans import LoanBook

    exp = experiments.load(name)
    book = LoanBook(exp.loans_path)
    with draw.progress(err_console) as on_event:
        pool, testbed = live.ManagerPool(exp), live.LiveTestbed(on_event)
        found = rec.check(pool, testbed, book, name)
        repairs = rec.repair(pool, testbed, book, name, found, on_event) if repair else []
        left = rec.check(pool, testbed, book, name) if repair else found
    if as_json:
        print(
            json.dumps(
                {
                    "experiment": name,
                    "found": [d.as_dict() for d in found],
                    "repaired": [r.as_dict() for r in repairs],
                    "left": [d.as_dict() for d in left],
                },
                indent=1,
            )
        )
    else:
        table = Table(title=f"{name}: the manager's pool against the testbed")
        for column in ("node", "disagreement", "detail"):
            table.add_column(column)
        for d in found:
            table.add_row(d.node, d.kind, d.detail)
        console.print(table if found else f"{name}: the manager and the testbed agree")
        for r in repairs:
            console.print(f"repaired {r.node} ({', '.join(r.kinds)}): {r.action}")
        if repair and left:
            err_console.print(f"[red]still disagreeing: {', '.join(d.node for d in left)}[/]")
    if left:
        raise typer.Exit(1)


def _describe(event: dict[str, Any]) -> str:
    d = event["data"]
    kind = event["kind"]
    if kind == "reclamation-started":
        why = f"{d['notice']}, " if d.get("notice") else f"{d['policy'] or '-'} "
        return (
            f"{d['reclamation']}: {why}GP {d['grace']:.0f} s, "
            f"{d['partition']} -> {d['beneficiary'] or 'pool'}: {', '.join(d['chosen'])}"
        )
    if kind == "reclamation-finished":
        killed = ", ".join(
            f"{j['job_id']} ({j['elapsed']:.0f} s x {j['node_count']})" for j in d["jobs_killed"]
        )
        return (
            f"{d['reclamation']}: forced {', '.join(d['forced']) or 'none'}; killed "
            f"{killed or 'none'}; wasted {d['wasted_cycles']:.0f} node-s"
        )
    if kind == "resume-reported":
        steps = ", ".join(f"{k} {float(v):.1f} s" for k, v in d.get("timings", {}).items())
        failed = "; ".join(f"{n}: {why}" for n, why in d.get("failed", {}).items())
        return f"{d['partition']}: ready {', '.join(d.get('ready', [])) or 'none'} ({steps})" + (
            f"; failed {failed}" if failed else ""
        )
    if kind == "partition-protected":
        return f"{d['partition']}: protected mode: {d['reason']}"
    if kind == "partition-unprotected":
        return f"{d['partition']}: protected mode ended by {d['by']}"
    if kind == "repair-started":
        return f"{d['partition']}: {d['node']}: {d['cause']} (by {d['holder']})"
    if kind == "node-repaired":
        order = ("drain", "reload", "configure", "return")
        timings = sorted(d.get("timings", {}).items(), key=lambda kv: (kv[0] not in order,
                         order.index(kv[0]) if kv[0] in order else 0, kv[0]))  # fmt: skip
        steps = ", ".join(f"{k} {float(v):.1f} s" for k, v in timings)
        if "hand over" in d.get("timings", {}):  # drift mended: the node went to the lender
            return f"{d['partition']}: {d['node']} handed over ({d['cause']}; {steps})"
        return f"{d['partition']}: {d['node']} back in {float(d['seconds']):.0f} s ({steps})"
    if kind == "repair-failed":
        return (
            f"{d['partition']}: {d['node']}: {d['error']}; failure {d['failures']} in a row, "
            f"the next repair at {_when(d['retry_at'])}"
        )
    if "nodes" in d and isinstance(d["nodes"], list):
        return f"{d.get('partition', '')}: {', '.join(str(n) for n in d['nodes'])}"
    return ", ".join(f"{k}={v}" for k, v in d.items())


@app.command("events")
def events(
    name: Name = None,
    since: Annotated[int, typer.Option("--since", help="skip the first N events")] = 0,
    url: Url = None,
    token_file: TokenFile = None,
) -> None:
    """The manager's event log, with wasted cycles per reclamation."""
    table = Table(title="events")
    for column in ("#", "time", "kind", "what"):
        table.add_column(column)
    total = 0.0
    with connect(name, url, token_file) as manager:
        log = manager.events(since)
    for e in log:
        table.add_row(str(e["seq"]), _when(e["time"]), e["kind"], _describe(e))
        if e["kind"] == "reclamation-finished":
            total += float(e["data"]["wasted_cycles"])
    console.print(table)
    console.print(f"wasted cycles, all reclamations: {total:.0f} node-seconds")


@app.command("ui")
def ui(
    name: Annotated[str, typer.Argument(help="experiment name")],
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="the local port; 0: any free one")
    ] = 0,
) -> None:
    """The pool's live page: served on this machine's loopback and forwarded to the active
    manager with its read-only observer token (the browser never holds it). Prints the URL and
    serves until interrupted."""
    import socket

    import uvicorn

    from elastic.manager.page_proxy import create_app
    from elastic.manager.workstation import open_manager

    exp = experiments.load(name)
    with open_manager(exp.inventory_path, exp.ssh_config_path, observer=True) as client:
        listener = socket.socket()
        try:
            listener.bind(("127.0.0.1", port))
        except OSError as err:
            listener.close()
            raise InputError(f"--port {port}: {err.strerror or err}") from err
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/ui"
        console.print(f"the pool of {name}, live: {url}  (Ctrl-C stops it)", highlight=False)
        server = uvicorn.Server(
            uvicorn.Config(create_app(client), log_level="warning", access_log=False)
        )
        server.run(sockets=[listener])


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="elastic", help="Elastic partitions: the manager and its clients.")
