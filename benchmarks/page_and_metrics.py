"""What seeing the pool costs: the live page's time to first render and its delay behind Slurm,
and the CPU one ``/metrics`` scrape costs the manager. Prints its figures; asserts nothing.

    PTC_HOME=... .venv/bin/python benchmarks/page_and_metrics.py NAME [--jobs 3] [--scrapes 200]
        [--nodes 1000] [--out benchmarks/results/page]

NAME is an elastic experiment (deployed as tests/integration/test_elastic.py deploys it), its
pool at rest. Three parts:

- **The page** in Debian's Chromium (headless, Selenium, Debian's chromedriver), through
  ``ptc elastic ui NAME``: from navigation to the first drawing of the pool (the page's own
  ``performance.now()`` at its first render), ``--jobs`` times in fresh tabs; then for each of
  ``--jobs`` one-node jobs, the delay between Slurm showing the job's node allocated and powered
  up (``squeue`` and ``sinfo`` on the head, one SSH round trip per poll, about every 0.3 s) and
  the page showing that node on, allocated, with the job (polled every 0.25 s): the page is as fresh as the Slurm client's last vector, so this is about the
  vector's interval plus the stream's half-second check.
- **A scrape on the live manager**: ``--scrapes`` GETs of ``/metrics`` through the SSH seam with
  the observer token; the manager process's CPU seconds (``/proc/PID/stat``, over SSH) before and
  after, divided by the scrapes.
- **A scrape at ``--nodes`` nodes**, in this process: a manager with that many pool nodes, a
  partition holding half of them and an event log of a resume and a release per node (the shape
  a busy pool's log has), scraped ``--scrapes`` times; ``time.process_time`` per scrape, the first
  (which folds the whole log) apart from the rest (which fold only what is new).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the tests' browser helpers

from support.browser import chromium, node_rows, page_server  # noqa: E402

from elastic.atomic import write_text  # noqa: E402
from elastic.manager.workstation import open_manager  # noqa: E402
from elastic.remote import ssh  # noqa: E402
from elastic.testbed import experiment as experiments  # noqa: E402


def head(exp: Any, command: str) -> str:
    return ssh.run(exp.ssh_config_path, "head", command, timeout=120)


def page_figures(name: str, jobs: int) -> dict[str, list[float]]:
    exp = experiments.load(name)
    first: list[float] = []
    delays: list[float] = []
    with page_server(name) as url, chromium() as driver:
        for _ in range(jobs):
            driver.switch_to.new_window("tab")
            driver.get(url)
            deadline = time.monotonic() + 60
            while driver.execute_script("return window.ptcFirstRender;") is None:
                if time.monotonic() > deadline:
                    raise SystemExit("the page never drew the pool")
                time.sleep(0.05)
            first.append(float(driver.execute_script("return window.ptcFirstRender;")))
            print(f"first render: {first[-1]:.0f} ms", flush=True)
        for _ in range(jobs):
            submit = "cd /home/ptc && runuser -u ptc -- sbatch --parsable -N1 --wrap 'sleep 30'"
            job = head(exp, submit).strip().split(";")[0]
            slurm_at = page_at = None
            node = ""
            deadline = time.monotonic() + 300
            while (slurm_at is None or page_at is None) and time.monotonic() < deadline:
                now = time.monotonic()
                if slurm_at is None:  # the node as Slurm shows it: allocated, powered up
                    out = head(exp, f"squeue -h -j {job} -o %N; sinfo -h -N -o '%N %T'")
                    lines = out.splitlines()
                    where = lines[0].strip() if lines and " " not in lines[0] else ""
                    states = dict(line.split() for line in lines[1:] if len(line.split()) == 2)
                    if where and states.get(where) in ("allocated", "mixed"):
                        slurm_at, node = now, where
                if page_at is None:
                    for row_node, (power, state, shown) in node_rows(driver).items():
                        if job in shown and power == "on" and state.startswith(("alloc", "mixed")):
                            page_at, node = time.monotonic(), node or row_node
                time.sleep(0.25)
            if slurm_at is None or page_at is None:
                raise SystemExit(f"job {job}: not seen running on Slurm and the page in 300 s")
            delays.append(page_at - slurm_at)
            print(f"job {job} on {node}: the page {delays[-1]:+.1f} s after Slurm", flush=True)
            head(exp, f"scancel {job}")
            time.sleep(25)  # the node idles and powers down before the next job
    return {"first_render_ms": first, "delay_s": delays}


def live_scrape(name: str, scrapes: int) -> dict[str, float]:
    exp = experiments.load(name)
    pid = head(exp, "systemctl show -p MainPID --value ptc-elastic-manager").strip()
    ticks = int(head(exp, "getconf CLK_TCK").strip())

    def cpu() -> float:
        fields = head(exp, f"cat /proc/{shlex.quote(pid)}/stat").rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime

    with open_manager(exp.inventory_path, exp.ssh_config_path, observer=True) as client:
        before = cpu()
        started = time.monotonic()
        size = 0
        for _ in range(scrapes):
            with client.streamed("/metrics", read_timeout=30) as (_, answer):
                size = len(answer.read())
        wall = time.monotonic() - started
        after = cpu()
    return {
        "scrapes": scrapes,
        "cpu_ms_per_scrape": 1000 * (after - before) / scrapes,
        "wall_ms_per_scrape": 1000 * wall / scrapes,
        "bytes": size,
    }


def projected_scrape(nodes: int, scrapes: int) -> dict[str, float]:
    from elastic.manager import JsonFileStore, Manager, Tokens
    from elastic.manager.auth import Principal
    from elastic.manager.metrics import Metrics

    with tempfile.TemporaryDirectory() as tmp:
        clock = [1_800_000_000.0]
        manager = Manager(
            JsonFileStore(Path(tmp) / "state.json"), Tokens(Path(tmp) / "tokens"),
            clock=lambda: clock[0], notifier=lambda *a: None,
        )  # fmt: skip
        admin = Principal("admin", admin=True)
        names = [f"node-{i}" for i in range(nodes)]
        for name in names:
            manager.register_node(admin, name, cpus=8, memory_mb=32768)
        manager.create_partition(admin, "slurm")
        slurm = Principal("slurm")
        for i in range(0, nodes, 50):  # resumes of 50 nodes, each reported, half given back
            batch = names[i : i + 50]
            manager.add_nodes(slurm, "slurm", nodes=batch)
            timings = {"manager": 0.1, "power_on": 2.0, "playbook": 3.0, "total": 15.0}
            manager.report_resume(
                slurm, "slurm", {"nodes": batch, "ready": batch, "timings": timings}
            )
            if (i // 50) % 2:
                manager.delete_nodes(slurm, "slurm", batch)
        metrics = Metrics(manager)
        times = []
        for _ in range(scrapes):
            started = time.process_time()
            text = metrics.exposition()
            times.append(time.process_time() - started)
        events = len(manager.read().events)
    return {
        "nodes": nodes,
        "events": events,
        "first_ms": 1000 * times[0],
        "median_ms": 1000 * statistics.median(times[1:]),
        "bytes": len(text),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name")
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    page = page_figures(args.name, args.jobs)
    live = live_scrape(args.name, args.scrapes)
    print(
        f"/metrics on the live manager: {live['cpu_ms_per_scrape']:.2f} ms CPU per scrape "
        f"({live['wall_ms_per_scrape']:.1f} ms wall through the SSH seam, {live['bytes']} bytes)"
    )
    big = projected_scrape(args.nodes, args.scrapes)
    print(
        f"/metrics at {big['nodes']} nodes ({big['events']} events), in-process: first "
        f"{big['first_ms']:.1f} ms CPU, then {big['median_ms']:.2f} ms (median), {big['bytes']} bytes"
    )
    print(
        f"page: first render {statistics.median(page['first_render_ms']):.0f} ms (median of "
        f"{len(page['first_render_ms'])}); behind Slurm {statistics.median(page['delay_s']):.1f} s "
        f"(median of {len(page['delay_s'])})"
    )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        result = {"page": page, "live_scrape": live, "projected_scrape": big}
        write_text(args.out / "results.json", json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
