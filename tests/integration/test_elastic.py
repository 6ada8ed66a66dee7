"""Elastic partitions, live, on one 1+4 experiment deployed with ptc_elastic=true.

Everything is real: slurmctld runs the programs the elastic role installed, the client asks the
manager (a systemd service on the head) for nodes, has the testbed start their machines (the
partition's node_operation is the default, power: a pool node at rest is a stopped container), runs the
resume playbook from the head, and slurmd registers; reclamations drain, requeue and release through Slurm. The tests run in file
order and each leaves every node back in the pool, idle and powered down.

The module has a testbed of its own with room for exactly its two experiments (the pool's 1+4
and the other user's 1+1): a machine moves between them only once one gives it back.

Times are short so the module runs in minutes: SuspendTime 20 s, SuspendTimeout 15 s (Slurm
holds a suspended node "powering down" that long, however quickly SuspendProgram is done), a PV
every 5 s, repeats of NotifyDeletePending every 10 s, PVs stale after 60 s, ResumeTimeout 90 s.

The module is the longest of the suite, so under xdist it runs as two groups on two workers:
most resume faults and the machines that leave the experiment (FAULTS_AND_LENDING), and the
live page and the ledger (to even the two out), get their own 1+4 experiment and small testbed,
as the module's fixtures are per worker. Run in one process,
both groups share one.

While developing, PTC_TEST_ELASTIC_REUSE=$PTC_HOME/experiments/NAME runs the tests against an
experiment already deployed with EXTRAVARS (it is left up).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import math
import os
import shlex
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import fake_ec2_api
import pandas as pd
import pytest
from naming import experiment_name
from remote import ssh, wait_for

from elastic import atomic, node_paths
from elastic.errors import PtcError
from elastic.manager.client import ManagerClient
from elastic.manager.errors import Conflict, Forbidden, Unauthenticated
from elastic.manager.workstation import open_manager
from elastic.policies import JobInfo, LifoPolicy, Snapshot, select_nodes, wasted_cycles
from elastic.remote.ssh import check, execute
from elastic.slurm import overhead
from elastic.slurm.commands import Runner, SlurmCommandError
from elastic.slurm.resize import Resizer, ResizeRefused
from elastic.testbed import experiment as experiments
from elastic.testbed import nodeops
from elastic.testbed.backends.local import capacity, provisioning

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAME = experiment_name("elastic", "PTC_TEST_ELASTIC_NAME")
NODES = ["node-0", "node-1", "node-2", "node-3"]
SUSPEND_TIME = 20
PROTECT_AFTER = 3
REPAIR_INTERVAL = 20
HEALTH_FREE_MB = {"/": 1024, "/tmp": 256, "/dev/shm": 16}
# The pool as two sites of the local testbed, as deployed: node-0/1 cheap (wanted: both),
# node-2/3 twice the price (wanted: none). Each node has its site as a Slurm feature; the
# rebalancing tests' rounds read the same sites.
CHEAP, DEAR = ["node-0", "node-1"], ["node-2", "node-3"]
SITES = (
    "sites:\n"
    "  - {name: cheap, price: 1, desired: 2, nodes: 'node-[0-1]'}\n"
    "  - {name: dear, price: 2, desired: 0, nodes: 'node-[2-3]'}\n"
)
SITES_PATH = Path(tempfile.gettempdir()) / "ptc-test-elastic-sites.yml"
EXTRAVARS = [
    "ptc_elastic=true",
    f"elastic_sites_file={SITES_PATH}",
    f"slurm_power_save_suspend_time={SUSPEND_TIME}",
    "slurm_power_save_suspend_timeout=15",
    "slurm_power_save_resume_timeout=90",
    "elastic_pv_interval=5",
    "elastic_notify_interval=10",
    "elastic_max_pv_age=60",
    # Running jobs may grow and shrink (E-HPC's expand and contract).
    "slurm_job_expansion=true",
    # Protected mode after fewer failed resumes than the default, so one job's can show it.
    f"elastic_protect_after={PROTECT_AFTER}",
    # The repair loop's rounds, shorter than the default minute; the health check also wants
    # /dev/shm (64 MiB here) to keep 16 MiB free, so that a test can fill a node's disk.
    f"elastic_repair_interval={REPAIR_INTERVAL}",
    "elastic_repair_backoff=30",
    f"slurm_health_check_free_mb={json.dumps(HEALTH_FREE_MB)}",
    # Prometheus on the head, scraping the node exporters, the managers and the Slurm client.
    "ptc_monitoring=true",
    # A site with no capacity is paused 20 s (not 5 minutes), so its probe comes within a test.
    "elastic_site_pause_first=20",
    "elastic_site_pause_most=60",
]
MARKS = "/home/ptc/elastic-marks"
# The second group (see the module's docstring).
FAULTS_AND_LENDING = pytest.mark.xdist_group("test_elastic_faults")
LENDEE = experiment_name("lendee")
# The module's testbed: the pool's 1+4 and the other user's 1+1, and not one machine more.
MACHINES = 7


@pytest.fixture(scope="module")
def small_testbed(tmp_path_factory: pytest.TempPathFactory, ptc: Any) -> Iterator[Path]:
    """The module's own testbed of MACHINES machines; the session's comes back afterwards."""
    before = os.environ[capacity.ENV]
    os.environ[capacity.ENV] = str(tmp_path_factory.mktemp("elastic-testbed"))
    capacity.set_machines(MACHINES)
    try:
        yield Path(os.environ[capacity.ENV])
    finally:
        # down on this testbed, before the session's comes back
        for name in (NAME, LENDEE):
            if experiments.exists(name):
                ptc("down", name)
        os.environ[capacity.ENV] = before


@pytest.fixture(scope="module")
def cluster(
    experiment_factory: Callable[..., Path], ptc: Any, request: pytest.FixtureRequest
) -> Path:
    atomic.write_text(SITES_PATH, SITES)  # every worker writes the same sites
    reuse = os.environ.get("PTC_TEST_ELASTIC_REUSE")
    if reuse:  # developing: an experiment deployed with EXTRAVARS already, kept afterwards
        expdir = Path(reuse).resolve()
        os.environ["PTC_HOME"] = str(expdir.parents[1])
        # its control service counts on the testbed it was made on, not the session's own
        os.environ[capacity.ENV] = os.environ.get(
            "PTC_TEST_ELASTIC_REUSE_TESTBED", str(capacity.DEFAULT_DIR)
        )
        global NAME
        NAME = expdir.name
        ssh(expdir, "head", f"install -d -o ptc -g ptc {MARKS}")
        return expdir
    request.getfixturevalue("small_testbed")
    expdir = experiment_factory(NAME, "profiles/slurm_cluster.py", "computeNodeCount=4")
    args = ["deploy", NAME]
    for extra in EXTRAVARS:
        args += ["-e", extra]
    proc = ptc(*args)
    assert proc.returncode == 0, f"ptc deploy {NAME} failed:\n{proc.stderr[-6000:]}"
    ssh(expdir, "head", f"install -d -o ptc -g ptc {MARKS}")
    return expdir


# -- helpers -------------------------------------------------------------------------------
def manager(expdir: Path, partition: str | None = None) -> Any:
    return open_manager(expdir / "inventory/hosts.yml", expdir / "inventory/ssh_config", partition)


def as_ptc(command: str) -> str:
    return f"cd /home/ptc && runuser -u ptc -- sh -c {shlex.quote(command)}"


def sbatch(expdir: Path, options: str, script: str) -> str:
    out = ssh(expdir, "head", as_ptc(f"sbatch --parsable {options} --wrap {shlex.quote(script)}"))
    return out.stdout.strip().split(";")[0]


def job(expdir: Path, job_id: str) -> dict[str, str]:
    """``scontrol show job`` as a dict (empty once Slurm forgot the job)."""
    out = ssh(expdir, "head", f"scontrol show job -o {job_id}", check=False).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def squeue_ids(expdir: Path, check: bool = True) -> list[str]:
    """The jobs Slurm still holds, any state (a COMPLETING one among them)."""
    return ssh(expdir, "head", "squeue --noheader --format=%i", check=check).stdout.split()


def sacct(expdir: Path, job_id: str) -> dict[str, str]:
    out = ssh(
        expdir,
        "head",
        f"sacct -X -n -P -j {job_id} --format=JobID,State,NNodes,NodeList,ExitCode",
    ).stdout.strip()
    if not out:
        return {}
    jid, state, nnodes, nodelist, code = out.splitlines()[-1].split("|")
    return {"id": jid, "state": state, "nnodes": nnodes, "nodes": nodelist, "exit": code}


def completed(expdir: Path, job_id: str, timeout: float, poll: float = 2.0) -> dict[str, str]:
    """sacct's row of ``job_id`` once the job has COMPLETED. On timeout it fails naming the
    job, with what sacct and slurmctld last said of it, the states of its nodes and the end of
    its output."""
    try:
        return dict(
            wait_for(
                f"job {job_id} to complete",
                lambda: (acct := sacct(expdir, job_id)).get("state") == "COMPLETED" and acct,
                timeout,
                poll,
            )
        )
    except AssertionError as err:
        held = job(expdir, job_id)
        seen = {k: held.get(k) for k in ("JobState", "Reason", "NodeList", "Restarts", "RunTime")}
        logged = ssh(
            expdir,
            "head",
            "journalctl -q -o cat -n 8 -u ptc-elastic-slurm-client -u slurmctld",
            check=False,
        ).stdout
        # what the job itself printed (sbatch's default output, in the owner's shared home)
        printed = ssh(expdir, "head", f"tail -n 6 /home/ptc/slurm-{job_id}.out", check=False)
        raise AssertionError(
            f"{err}; sacct: {sacct(expdir, job_id)}; slurmctld: {seen}; "
            f"nodes: {slurm_nodes(expdir)}; last logged: {logged.splitlines()}; "
            f"the job printed: {printed.stdout.splitlines()}"
        ) from None


def once_running(expdir: Path, job_id: str, timeout: float = 300) -> dict[str, str]:
    """Job ``job_id``'s record (``scontrol show job``) once it runs."""
    found: dict[str, str] = wait_for(
        f"job {job_id} running",
        lambda: (j := job(expdir, job_id)).get("JobState") == "RUNNING" and j,
        timeout,
    )
    return found


# What Slurm's commands say when slurmctld did not answer within its MessageTimeout: on this
# machine, two cores shared by every test's cluster, a busy slurmctld now and then.
SLURMCTLD_BUSY = ("Socket timed out on send/recv operation", "Unable to contact slurm controller")


def slurm_nodes(expdir: Path) -> dict[str, tuple[str, str]]:
    """Each node's Slurm state and reason; a slurmctld too busy to answer is asked again (three
    times in all) before the test fails on it."""
    command = "sinfo --noheader --Node --format='%N|%T|%E'"
    for _ in range(2):
        shown = ssh(expdir, "head", command, check=False)
        if shown.returncode == 0 or not any(m in shown.stderr for m in SLURMCTLD_BUSY):
            break
        time.sleep(2)
    out = ssh(expdir, "head", command).stdout if shown.returncode else shown.stdout
    found = {}
    for line in out.splitlines():
        name, state, reason = line.strip().split("|", 2)
        found[name] = (state, "" if reason == "none" else reason)
    return found


def owners(expdir: Path) -> dict[str, str | None]:
    with manager(expdir) as m:
        return {n["name"]: n["owner"] for n in m.discover()}


def expand(expdir: Path, hostlist: str) -> list[str]:
    return ssh(expdir, "head", f"scontrol show hostnames {hostlist}").stdout.split()


def all_back_in_pool(expdir: Path) -> bool:
    nodes = slurm_nodes(expdir)
    return set(owners(expdir).values()) == {None} and all(nodes[n][0] == "idle~" for n in NODES)


RUN = f"run{time.time_ns()}"  # marks of earlier runs do not release this run's jobs


def mark(expdir: Path, name: str) -> None:
    ssh(expdir, "head", as_ptc(f"touch {MARKS}/{RUN}-{name}"))


def until_mark(name: str, then: str = "true") -> str:
    """A job script: wait for the test's mark, then run ``then``; when Slurm restarts the
    job (requeued), it skips the wait and runs ``then`` at once."""
    return (
        f'if [ "${{SLURM_RESTART_COUNT:-0}}" -eq 0 ]; then '
        f"while [ ! -e {MARKS}/{RUN}-{name} ]; do sleep 1; done; fi; {then}"
    )


@contextlib.contextmanager
def awake() -> Iterator[None]:
    """The pool's machines are off at rest: a test that changes a node's disk does it with the
    nodes powered on and held up, as a deploy does. Once the block ends the client's loop
    powers the free ones off again; the disk keeps the change."""
    with nodeops.awake(experiments.load(NAME), "test"):
        yield


def events(expdir: Path, kind: str) -> list[dict[str, Any]]:
    with manager(expdir) as m:
        return [e for e in m.events(0, 10000) if e["kind"] == kind]


@pytest.fixture
def leaves_pool_idle(cluster: Path) -> Iterator[Path]:
    yield cluster
    # Every test hands the pool back as it found it: nodes free and powered down (a test that
    # failed half-way may leave jobs behind).
    ssh(cluster, "head", "scancel -u ptc", check=False)
    wait_for("every node back in the pool, idle~", lambda: powered_down_early(cluster), 240, 5)


def powered_down_early(expdir: Path) -> bool:
    """Whether the pool is back (``all_back_in_pool``); if not, nodes powered up with nothing to
    run are suspended now rather than after SuspendTime. Only the teardown between tests uses it:
    it saves a SuspendTime of waiting per test, and the tests that check the suspend itself wait
    for Slurm's own."""
    if all_back_in_pool(expdir):
        return True
    spare = [name for name, (state, _) in slurm_nodes(expdir).items() if state == "idle"]
    if spare:
        ssh(
            expdir,
            "head",
            f"scontrol update nodename={','.join(spare)} state=POWER_DOWN",
            check=False,
        )
    return False


# -- acceptance 1: partition-driven up- and downscaling --------------------------------------
def test_a_job_resumes_nodes_through_the_hooks_and_they_return_after_suspend_time(
    leaves_pool_idle: Path,
) -> None:
    expdir = leaves_pool_idle
    assert all_back_in_pool(expdir), "the pool does not start free and powered down"
    job_id = sbatch(expdir, "-N3", "srun hostname; sleep 2")
    done = completed(expdir, job_id, 300)
    assert done["nnodes"] == "3" and done["exit"] == "0:0", done
    used = expand(expdir, done["nodes"])
    # while idle, the nodes stay in Slurm's partition (held by slurm in the manager)
    held = owners(expdir)
    assert all(held[n] in ("slurm", None) for n in used)
    timings = ssh(expdir, "head", f"tail -n 5 {node_paths.RESUME_TIMINGS}").stdout
    last = [json.loads(line) for line in timings.splitlines()][-1]
    assert sorted(last["ready"]) == sorted(used) and last["failed"] == {}
    # after SuspendTime idle, SuspendProgram stops slurmd and gives the nodes back
    wait_for("the nodes back in the pool", lambda: all_back_in_pool(expdir), SUSPEND_TIME + 120)
    for node in used:
        active = ssh(expdir, node, "systemctl is-active slurmd", check=False).stdout.strip()
        assert active != "active", f"{node}: slurmd still runs after the suspend"
    deleted = events(expdir, "nodes-deleted")
    assert {n for e in deleted for n in e["data"]["nodes"]} >= set(used)


def prometheus(expdir: Path, query: str) -> list[dict[str, Any]]:
    """The instant vector of ``query``, asked of Prometheus on the head (it listens on loopback)."""
    url = "http://127.0.0.1:9090/api/v1/query?" + urllib.parse.urlencode({"query": query})
    answer = json.loads(ssh(expdir, "head", f"curl -sS --fail {shlex.quote(url)}").stdout)
    assert answer["status"] == "success", answer
    found: list[dict[str, Any]] = answer["data"]["result"]
    return found


def test_prometheus_scrapes_the_pool_s_series_after_a_resume(leaves_pool_idle: Path) -> None:
    """The monitoring role's Prometheus scrapes the manager and the Slurm client (with the
    observer token) and the node exporters: after a job resumed a node, the resume is counted,
    the node's own exporter was read while it was up, and the client shows the pool by state.
    The metrics refuse a caller with no token or a wrong one."""
    expdir = leaves_pool_idle
    job_id = sbatch(expdir, "-N1", "sleep 1")
    [node] = expand(expdir, completed(expdir, job_id, 300)["nodes"])
    resumes = 'sum(ptc_resume_seconds_count{job="ptc_manager",partition="slurm"})'

    def scraped() -> bool:
        counted = prometheus(expdir, resumes)
        seen = prometheus(expdir, f'node_uname_info{{job="node",node="{node}"}}')
        pool = prometheus(expdir, 'ptc_slurm_pool_nodes{job="ptc_slurm_client"}')
        return bool(counted and float(counted[0]["value"][1]) >= 1 and seen and pool)

    # a scrape every 15 s; the node stays up SuspendTime after its job
    wait_for(f"Prometheus to hold the resume of {node} and its exporter's series", scraped, 120, 5)
    up = {r["metric"]["job"]: r["value"][1] for r in prometheus(expdir, "up{node='head'}")}
    assert up.get("ptc_manager") == "1" and up.get("ptc_slurm_client") == "1", up
    address = ssh(expdir, "head", "ip -4 -o addr show eth1").stdout.split()[3].split("/")[0]
    ca = "/etc/ptc-elastic/tls/ca.crt"
    for header in ("", "-H 'Authorization: Bearer wrong'"):
        for port in (8700, 8701):
            got = ssh(
                expdir, "head",
                f"curl -sS --cacert {ca} {header} -w '%{{http_code}}' https://{address}:{port}/metrics",
            ).stdout  # fmt: skip
            assert got.endswith("401") and "ptc_" not in got, (port, header, got)


@FAULTS_AND_LENDING
def test_the_live_page_shows_a_node_go_from_powered_down_to_allocated_without_a_reload(
    leaves_pool_idle: Path,
) -> None:
    """In Debian's Chromium (headless, under Selenium): `ptc elastic ui` serves the page; a job
    submitted while it is open turns one of the pool's nodes from off to allocated on the page,
    by the manager's events alone (a mark set in the page survives: nothing reloaded it). A
    screenshot is kept. The manager gives no page to a wrong token."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    from support.browser import chromium, page_server, screenshot
    from support.browser import node_rows as rows

    expdir = leaves_pool_idle

    with page_server(NAME) as url, chromium() as driver:
        driver.get(url)
        wait = WebDriverWait(driver, 60, poll_frequency=0.5)
        # the page is as fresh as the client's last vector: the pool shows off within one (or,
        # just after the deploy, once Slurm has powered the pool down)
        wait.until(lambda d: set(rows(d)) == set(NODES))
        WebDriverWait(driver, 180, poll_frequency=0.5).until(
            lambda d: all(power == "off" for power, _, _ in rows(d).values())
        )
        assert driver.find_element(By.ID, "status").text == "Live"
        driver.execute_script("window.ptcMark = 'not reloaded';")
        job_id = sbatch(expdir, "-N1", "sleep 40")

        def allocated(d: Any) -> str | None:
            for node, (power, state, jobs) in rows(d).items():
                if power == "on" and state.startswith(("allocated", "mixed")) and job_id in jobs:
                    return node
            return None

        node = WebDriverWait(driver, 240, poll_frequency=0.5).until(allocated)
        assert driver.execute_script("return window.ptcMark;") == "not reloaded"
        text = driver.find_element(By.TAG_NAME, "body").text
        assert "● on" in text and "Where a resume's time goes" in text
        shot = screenshot(driver, "live-page-allocated")
        assert shot.stat().st_size > 10_000, shot
    assert node in NODES
    address = ssh(expdir, "head", "ip -4 -o addr show eth1").stdout.split()[3].split("/")[0]
    refused = ssh(
        expdir, "head",
        "curl -sS --cacert /etc/ptc-elastic/tls/ca.crt -H 'Authorization: Bearer wrong' "
        f"-w '%{{http_code}}' https://{address}:8700/ui",
    ).stdout  # fmt: skip
    assert refused.endswith("401") and "<html" not in refused, refused


def test_a_job_the_whole_pool_could_never_hold_is_refused_at_submit_with_the_reason(
    leaves_pool_idle: Path,
) -> None:
    """Admission control: powered-down pool nodes count, so one node more than the pool, or
    more memory than a node has, is refused at once, not left pending; nothing is resumed."""
    expdir = leaves_pool_idle
    before = squeue_ids(expdir)
    too_many = len(NODES) + 1
    for options, why in [
        (f"-N{too_many}", f"it asks for {too_many} nodes and partition main has {len(NODES)}"),
        ("--mem=100G", "it asks for 102400 MB on one node and the largest node has"),
    ]:
        out = ssh(expdir, "head", as_ptc(f"sbatch {options} --wrap true"), check=False)
        assert out.returncode != 0, f"sbatch {options} was admitted: {out.stdout}"
        assert f"ptc: this job can never run: {why}" in out.stderr, out.stderr
    assert squeue_ids(expdir) == before
    assert all_back_in_pool(expdir), "a refused job resumed pool nodes"
    fits = sbatch(expdir, f"-N{len(NODES)} --hold", "true")  # the whole pool is admitted
    assert job(expdir, fits).get("JobState") == "PENDING"
    ssh(expdir, "head", f"scancel {fits}")


def test_a_burst_under_a_provisioning_limit_waits_its_turn_and_all_of_it_runs(
    leaves_pool_idle: Path, ptc: Any, tmp_path: Path
) -> None:
    """The testbed provisions one node at a time: a burst of three one-node jobs resumes its
    nodes one after the other (none dropped), and every job completes."""
    expdir = leaves_pool_idle
    since = time.time()
    capacity.set_limits(1, None)
    try:
        burst = [sbatch(expdir, "-N1 --exclusive", "sleep 2") for _ in range(3)]
        for job_id in burst:
            wait_for(
                f"job {job_id} of the burst to complete",
                lambda j=job_id: sacct(expdir, j).get("state") == "COMPLETED",
                300,
            )
    finally:
        capacity.set_limits(0, 0)
    ran = [
        r
        for r in provisioning.history(since)
        if r["experiment"] == NAME and r["action"] == "power on"
    ]
    assert sum(len(r["nodes"]) for r in ran) >= 3, ran
    assert all(len(r["nodes"]) == 1 and r["outcome"] == "done" for r in ran), ran
    ran.sort(key=lambda r: r["started"])
    for before, after in itertools.pairwise(ran):
        assert after["started"] >= before["ended"], f"two provisionings overlapped: {ran}"
    # the overhead taxonomy of the burst: a row per job and node, the parts end to end
    out = tmp_path / "overhead"
    shown = ptc("elastic", "overhead", NAME, "--out", str(out), "--since", str(since - 1))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    frame = pd.read_parquet(out / "overhead.parquet")
    assert set(frame["job_id"].astype(str)) >= set(burst), frame
    timings = ssh(expdir, "head", f"tail -n 20 {node_paths.RESUME_TIMINGS}").stdout
    for row in frame.to_dict("records"):
        # the whole row, the resumes and the provisionings, should this fail: none truncated
        why = f"row {row}\nresumes:\n{timings}\nprovisionings: {ran}"
        parts = sum(row[k] for k in overhead.PARTS)
        assert abs(parts - row["submit_to_start_s"]) < 1.0, why
        assert row["testbed_s"] > 0 and row["configure_s"] > 0, why
    assert (out / "overhead.png").stat().st_size > 0
    # the client's part of each resume is in the manager's event log too
    reported = [e for e in events(expdir, "resume-reported") if e["time"] >= since - 1]
    assert {n for e in reported for n in e["data"]["ready"]} >= set(frame["node"]), reported
    assert all(e["data"]["timings"]["total"] > 0 for e in reported), reported


def start_one_by_one(expdir: Path, scripts: list[str]) -> list[tuple[str, str]]:
    """Submit exclusive one-node jobs one after the other, each once the previous runs, so
    their elapsed times differ; [(job id, node)]."""
    started = []
    for script in scripts:
        job_id = sbatch(expdir, "-N1 --exclusive", script)
        info = wait_for(
            f"job {job_id} to run",
            lambda j=job_id: (i := job(expdir, j)).get("JobState") == "RUNNING" and i,
            240,
        )
        started.append((job_id, info["NodeList"]))
    return started


def _answers(expdir: Path) -> bool:
    try:
        with manager(expdir) as m:
            m.status()
    except PtcError:
        return False
    return True


def wait_for_pv_covering(expdir: Path, nodes: list[str], after: float = 0.0) -> dict[str, Any]:
    """A PV of the last 10 s (and taken after ``after``, a time.time()) that values ``nodes``."""

    def fresh() -> dict[str, Any] | None:
        with manager(expdir) as m:
            part = next(p for p in m.status()["partitions"] if p["name"] == "slurm")
        pv = part["pv"]
        if (
            pv
            and all(pv["values"].get(n, 0.0) > 0.0 for n in nodes)
            and pv["age"] < 10
            and time.time() - pv["age"] > after
        ):
            return dict(pv)
        return None

    return dict(wait_for("a PV with every job", fresh, 60))


def finished_at_its_deadline(expdir: Path, rec_id: str) -> dict[str, Any]:
    """The reclamation once done; its jobs kept their nodes until the client requeued them,
    2 s (elastic_requeue_lead) before the grace period's end."""
    with manager(expdir) as m:
        rec = wait_for(
            f"reclamation {rec_id} to finish",
            lambda: (r := m.reclamation(rec_id))["state"] == "done" and r,
            120,
        )
    assert rec["finished_at"] >= rec["deadline"] - 2 - 1, "finished well before its deadline"
    return dict(rec)


# -- acceptance 2 and 4 (manager restart): graceful preemption under LIFO --------------------
def test_lifo_reclaim_releases_the_policy_s_nodes_and_counts_the_waste(
    leaves_pool_idle: Path, ptc: Any
) -> None:
    expdir = leaves_pool_idle
    (a, node_a), (b, node_b), (c, node_c) = start_one_by_one(
        expdir,
        [until_mark("A"), until_mark("B"), until_mark("never", then="sleep 3")],
    )
    wait_for_pv_covering(expdir, [node_a, node_b, node_c])
    proc = ptc("elastic", "reclaim", NAME, "--count", "2", "--grace", "30")
    assert proc.returncode == 0, proc.stderr
    mark(expdir, "B")  # B finishes within the grace period; C does not
    # the manager restarts in the middle of the reclamation
    ssh(expdir, "head", "systemctl restart ptc-elastic-manager")
    wait_for("the manager to answer again", lambda: _answers(expdir), 60)
    started = events(expdir, "reclamation-started")[-1]
    rec_id = started["data"]["reclamation"]
    chosen = started["data"]["chosen"]
    # exactly the nodes elastic/policies names for the snapshot the PV described
    snap_jobs = tuple(
        JobInfo(j["job_id"], tuple(j["nodes"]), j["elapsed"], remaining=j["remaining"])
        for j in started["data"]["jobs"]
    )
    pv = started["data"]["pv"]
    all_jobs = [
        JobInfo(j["job_id"], tuple(j["nodes"]), j["elapsed"], remaining=j["remaining"])
        for j in pv["jobs"]
    ]
    snapshot = Snapshot(pv["time"], tuple(pv["values"]), tuple(all_jobs))
    assert chosen == select_nodes(LifoPolicy().evaluate(snapshot), 2)
    assert sorted(chosen) == sorted([node_b, node_c]), (chosen, node_a, node_b, node_c)
    assert {j.job_id for j in snap_jobs} == {b, c}
    rec = finished_at_its_deadline(expdir, rec_id)
    # B completed normally; C was requeued and completes on another node
    assert wait_for("B to complete", lambda: sacct(expdir, b).get("state") == "COMPLETED", 60)
    assert wait_for("C to complete", lambda: sacct(expdir, c).get("state") == "COMPLETED", 240)
    finished = next(
        e for e in events(expdir, "reclamation-finished") if e["data"]["reclamation"] == rec_id
    )
    assert [j["job_id"] for j in finished["data"]["jobs_killed"]] == [c]
    requeued = [e for e in events(expdir, "jobs-requeued") if e["data"]["reclamation"] == rec_id]
    assert [j["job_id"] for e in requeued for j in e["data"]["jobs"]] == [c]
    # the simulator's formula on the same jobs: C did not finish within GP, B did
    shift = rec["requested_at"] - pv["time"]
    at_reclaim = Snapshot(
        rec["requested_at"],
        tuple(pv["values"]),
        tuple(
            JobInfo(
                j.job_id, j.nodes, j.elapsed + shift, remaining=math.inf if j.job_id == c else 0
            )
            for j in snap_jobs
        ),
    )
    expected = wasted_cycles(at_reclaim, chosen, 30.0).total
    assert finished["data"]["wasted_cycles"] == pytest.approx(expected)
    assert expected > 30.0  # (elapsed + GP) x 1 node for C
    mark(expdir, "A")
    assert wait_for("A to complete", lambda: sacct(expdir, a).get("state") == "COMPLETED", 60)


# -- acceptance 3 and 4 (tokens, stale PV, bad requests): the reference client ----------------
def test_reference_client_takes_nodes_from_a_full_partition_without_losing_a_job(
    leaves_pool_idle: Path, ptc: Any
) -> None:
    expdir = leaves_pool_idle
    jobs = start_one_by_one(expdir, [until_mark("R", then="sleep 2")] * 4)
    assert sorted(node for _, node in jobs) == NODES
    wait_for_pv_covering(expdir, NODES)
    held_by_slurm = sorted(n for n, o in owners(expdir).items() if o == "slurm")
    assert held_by_slurm == NODES

    # a wrong token gets 401; a partition releasing another's node gets 403
    with manager(expdir) as admin:
        url = admin.url
        transport = admin._http._transport  # the same SSH forward, another token
        with pytest.raises(Unauthenticated):
            ManagerClient(url, "not-a-token", transport=transport).status()
    with manager(expdir, "ref") as ref, pytest.raises(Forbidden):
        ref.delete_nodes("ref", ["node-0"])

    # a stale PV is refused: stop the client's PV loop, store a vector 200 s old
    ssh(expdir, "head", "systemctl stop ptc-elastic-slurm-client")
    try:
        with manager(expdir, "slurm") as slurm:  # only the partition itself may
            slurm.set_values(
                "slurm", dict.fromkeys(NODES, 0.5), policy="LIFO", at=time.time() - 200
            )
        with manager(expdir) as admin:
            with pytest.raises(Conflict, match="stale"):
                admin.reclaim("slurm", 1, 30)
            assert admin.status()["reclamations"] == []
    finally:
        ssh(expdir, "head", "systemctl start ptc-elastic-slurm-client")
    wait_for_pv_covering(expdir, NODES)

    # bad requests name the field and change nothing
    before = owners(expdir), len(events(expdir, "reclamation-started"))
    for args, field in (
        (["reclaim", NAME, "--count", "9", "--grace", "30"], "count"),
        (["reclaim", NAME, "--count", "1", "--grace", "-5"], "grace"),
        (["reclaim", NAME, "--count", "1", "--grace", "5", "--partition", "nope"], "partition"),
        (["release", NAME, "node-99"], "nodes"),
        (["acquire", NAME, "--count", "9"], "count"),
    ):
        proc = ptc("elastic", *args)
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
        assert field in proc.stderr, (args, proc.stderr)
    assert (owners(expdir), len(events(expdir, "reclamation-started"))) == before

    # the reference client acquires 2 nodes from an empty pool: Slurm gives 2 back
    proc = ptc("elastic", "acquire", NAME, "--count", "2", "--grace", "20", "--wait", "180")
    assert proc.returncode == 0, proc.stderr
    held = owners(expdir)
    taken = sorted(n for n, o in held.items() if o == "ref")
    assert len(taken) == 2 and sorted(n for n, o in held.items() if o == "slurm") == sorted(
        set(NODES) - set(taken)
    )
    nodes = wait_for(
        "Slurm to see the taken nodes drained for ref",
        lambda: (
            all(
                (s := slurm_nodes(expdir))[n][1] == "ptc: held by partition ref"
                and s[n][0].startswith("drain")
                for n in taken
            )
            and s
        ),
        120,
    )
    # drained and powered down (or powering down): Slurm will not resume them for a job
    assert all(nodes[n][0][-1] in "~%" for n in taken), nodes
    status = ptc("elastic", "status", NAME)
    assert status.returncode == 0 and "ref" in status.stdout, status.stderr
    # no job is lost: the two requeued jobs run on the nodes Slurm kept once the others end
    mark(expdir, "R")
    for job_id, _ in jobs:
        assert wait_for(
            f"job {job_id} to complete",
            lambda j=job_id: sacct(expdir, j).get("state") == "COMPLETED",
            240,
        )
    proc = ptc("elastic", "release", NAME, *taken)
    assert proc.returncode == 0, proc.stderr
    log = ptc("elastic", "events", NAME)
    assert log.returncode == 0 and "wasted cycles" in log.stdout


# -- a reclamation that lands on a node powering up for its job -------------------------------
SLOW_START = "/etc/systemd/system/slurmd.service.d/zz-ptc-test-slow-start.conf"


def test_a_reclamation_during_a_resume_leaves_the_job_its_grace_period(
    leaves_pool_idle: Path, ptc: Any
) -> None:
    """Slurm 22.05 requeues at once the job of a node drained while it powers up for that job;
    the client drains such a node only once it is up, so the job runs within its GP."""
    expdir = leaves_pool_idle
    # slurmd on node-0 takes 40 s to start: Slurm holds the node "powering up" that long
    with awake():
        ssh(
            expdir,
            "node-0",
            f"mkdir -p {Path(SLOW_START).parent} && printf '[Service]\\n"
            f"ExecStartPre=/bin/sleep 40\\n' > {SLOW_START} && systemctl daemon-reload",
        )
    try:
        job_id = sbatch(expdir, "-N1 -w node-0", until_mark("P"))
        wait_for(
            "node-0 powering up for the job, held by slurm",
            lambda: "#" in slurm_nodes(expdir)["node-0"][0] and owners(expdir)["node-0"] == "slurm",
            120,
        )
        wait_for_pv_covering(expdir, ["node-0"])  # the configuring job counts in the PV
        proc = ptc("elastic", "reclaim", NAME, "--count", "1", "--grace", "120")
        assert proc.returncode == 0, proc.stderr
        started = events(expdir, "reclamation-started")[-1]
        rec_id = started["data"]["reclamation"]
        assert started["data"]["chosen"] == ["node-0"]
        assert [j["job_id"] for j in started["data"]["jobs"]] == [job_id]
        # once up, the node is drained for the reclamation and the job runs on it, not requeued
        wait_for(
            "the job running on node-0, drained for the reclamation",
            lambda: (
                job(expdir, job_id).get("JobState") == "RUNNING"
                and (s := slurm_nodes(expdir)["node-0"])[0].startswith("drain")
                and s[1].startswith(f"ptc reclamation {rec_id}")
            ),
            180,
        )
        # The reclamation began while node-0 was still powering up: before its slurmd started
        # (read from the node, not from how long this test's own commands took).
        up_at = ssh(
            expdir,
            "node-0",
            "systemctl show --timestamp=unix -p ActiveEnterTimestamp --value slurmd",
        ).stdout.strip()
        assert up_at.startswith("@") and started["time"] < float(up_at[1:]), (started, up_at)
        mark(expdir, "P")
        assert wait_for(
            "the job to complete", lambda: sacct(expdir, job_id).get("state") == "COMPLETED", 120
        )
        assert job(expdir, job_id).get("Restarts") == "0", job(expdir, job_id)
        with manager(expdir) as m:
            wait_for(
                f"reclamation {rec_id} to finish",
                lambda: m.reclamation(rec_id)["state"] == "done",
                180,
            )
        finished = next(
            e for e in events(expdir, "reclamation-finished") if e["data"]["reclamation"] == rec_id
        )
        assert finished["data"]["jobs_killed"] == []
        assert owners(expdir)["node-0"] is None
    finally:
        with awake():
            ssh(expdir, "node-0", f"rm -f {SLOW_START}; systemctl daemon-reload", check=False)


# -- acceptance 4: resume failures ----------------------------------------------------------
NEVER_REGISTERS = "/etc/systemd/system/slurmd.service.d/zz-ptc-test-never-registers.conf"


def down_and_given_back(expdir: Path, node: str) -> tuple[str, str] | None:
    """``(state, reason)`` once ``node`` is DOWN with a reason ptc gave and back in the pool:
    Slurm marks a node DOWN at ResumeTimeout before ResumeFailProgram gives ptc's reason and
    hands the node back, so the one without the others is not the end of a failure."""
    state, reason = slurm_nodes(expdir)[node]
    mine = state.startswith("down") and reason.startswith("ptc resume:")
    return (state, reason) if mine and owners(expdir)[node] is None else None


def requeued(expdir: Path, job_id: str) -> dict[str, str] | None:
    """The job once Slurm requeued it: pending again, restarted at least once."""
    info = job(expdir, job_id)
    ok = info.get("JobState") == "PENDING" and int(info.get("Restarts", "0")) >= 1
    return info if ok else None


def read_disk(container: str, path: str) -> str:
    """A file of a node's disk, read from the host (the machine may be powered off)."""
    root = subprocess.run(
        ["podman", "mount", container], capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()
    try:
        return (Path(root) / path).read_text()
    finally:
        subprocess.run(["podman", "umount", container], check=False, timeout=120)


def repaired(expdir: Path, nodes: Sequence[str]) -> dict[str, dict[str, Any]] | None:
    """The repair loop's last ``node-repaired`` event of each of ``nodes``, once each has one
    and Slurm has the node back in service (neither DOWN nor drained, nor not responding)."""
    done = {e["data"]["node"]: e["data"] for e in events(expdir, "node-repaired")}
    states = slurm_nodes(expdir)
    back = all(
        n in done and not states[n][0].startswith(("down", "drain")) and "*" not in states[n][0]
        for n in nodes
    )
    return {n: done[n] for n in nodes} if back else None


@FAULTS_AND_LENDING
def test_nodes_broken_four_ways_are_down_with_the_reason_and_the_repair_loop_mends_them(
    leaves_pool_idle: Path,
) -> None:
    """Four faults at once, and nobody mends a node by hand. Two pool nodes at rest whose
    resumes fail: node-3's playbook fails (slurmd masked), node-2's slurmd "starts" but never
    registers, so Slurm gives up at ResumeTimeout and runs ResumeFailProgram. Each is DOWN with
    ptc's reason, its job requeued, the node back in the pool. Two nodes running a job: node-0's
    munge dies (slurmd stops answering), node-1's /dev/shm fills up (the health check drains
    it, and the loop waits for its job to end). The repair loop gives each a fresh disk,
    configures it and returns it; the requeued jobs complete."""
    expdir = leaves_pool_idle
    held = sbatch(expdir, "-N2 -w node-[0-1]", "sleep 600")
    wait_for(f"job {held} running", lambda: job(expdir, held).get("JobState") == "RUNNING", 180)
    ssh(expdir, "node-0", "systemctl stop munge")
    free = HEALTH_FREE_MB["/dev/shm"]
    ssh(expdir, "node-1", f"fallocate -l $(( $(df -P -k /dev/shm | awk 'NR==2{{print $4}}') "
                          f"- {free - 4} * 1024 ))K /dev/shm/ptc-test-fill")  # fmt: skip
    # node-3: the resume playbook fails; node-2: slurmd never registers. Slurm often resumes
    # both in one ResumeProgram call: node-3 must fail at once all the same.
    with awake():
        ssh(expdir, "node-3", "systemctl mask slurmd")
        ssh(
            expdir,
            "node-2",
            f"mkdir -p {Path(NEVER_REGISTERS).parent} && printf '[Service]\\nType=simple\\n"
            f"ExecStart=\\nExecStart=/bin/sleep infinity\\n' > {NEVER_REGISTERS}"
            " && systemctl daemon-reload",
        )
    failing = sbatch(expdir, "-N1 -w node-3", "true")
    silent = sbatch(expdir, "-N1 -w node-2", "true")
    # the failed step downed it, not Slurm's ResumeTimeout (whose reason would come first)
    _, reason = wait_for(
        "node-3 DOWN with the failed task, back in the pool",
        lambda: down_and_given_back(expdir, "node-3"),
        240,
    )
    # node-3 is of the site dear: its provisioner's failure names the site
    assert "ptc resume: configure failed: site dear: task 'elastic : Start slurmd' failed" in (
        reason
    ), reason
    assert "masked" in reason
    wait_for(f"job {failing} requeued, not lost", lambda: requeued(expdir, failing), 60)
    # the health check drained node-1 (while it ran its job, which the loop waits for)
    _, reason = wait_for(
        "node-1 drained by the health check",
        lambda: (s := slurm_nodes(expdir)["node-1"])[1].startswith("ptc-health:") and s,
        120,
    )
    assert reason.startswith("ptc-health: /dev/shm has ") and f"less than {free}" in reason
    _, reason = wait_for(
        "node-2 DOWN after ResumeTimeout, back in the pool",
        lambda: down_and_given_back(expdir, "node-2"),
        240,
    )
    # the reason only ptc's ResumeFailProgram gives
    assert reason == "ptc resume: slurmd did not register (ResumeTimeout)"
    wait_for(f"job {silent} requeued, not lost", lambda: requeued(expdir, silent), 60)
    ssh(expdir, "head", f"scancel {held}")  # node-1 may be mended once its job is gone
    try:
        # each repair is a fresh disk and a playbook run: a loaded machine makes them slow
        done = wait_for("all four mended by the loop", lambda: repaired(expdir, NODES), 720, 5)
    except AssertionError as err:
        mended = sorted({e["data"]["node"] for e in events(expdir, "node-repaired")})
        client = ssh(expdir, "head", "journalctl -q -o cat -n 30 -u ptc-elastic-slurm-client",
                     check=False).stdout  # fmt: skip
        raise AssertionError(
            f"{err}; Slurm: {slurm_nodes(expdir)}; repaired: {mended}; "
            f"the client last said: {client.splitlines()}"
        ) from None
    # each node's first repair names its fault (one that failed on a loaded machine is tried
    # again for "its last repair failed")
    first: dict[str, str] = {}
    for e in events(expdir, "repair-started"):
        first.setdefault(e["data"]["node"], e["data"]["cause"])
    assert first["node-0"] == "not responding"
    assert first["node-1"].startswith("health check: /dev/shm has ")
    assert first["node-2"] == "resume failed: slurmd did not register (ResumeTimeout)"
    assert first["node-3"].startswith("resume failed: configure failed: site dear: task")
    for data in done.values():
        assert set(data["timings"]) == {"drain", "reload", "configure", "return"}, data
    # a fresh disk configured as the deploy configured it, with the settings it was given
    check = read_disk(f"ptc-{NAME}-node-1", "etc/slurm/ptc-healthcheck.conf")
    (paths,) = [line for line in check.splitlines() if line.startswith("FREE_PATHS=")]
    assert set(paths.removeprefix("FREE_PATHS=(").rstrip(")").split()) == set(HEALTH_FREE_MB)
    # each claimed first in the manager's store; a repair that failed on the loaded machine (an
    # SSH timeout) was tried again after its backoff, and came back (above)
    started = {e["data"]["node"] for e in events(expdir, "repair-started")}
    assert set(NODES) <= started
    # the requeued jobs complete on the mended nodes
    for job_id in (failing, silent):
        assert wait_for(
            f"job {job_id} to complete",
            lambda j=job_id: sacct(expdir, j).get("state") == "COMPLETED",
            240,
        )


@FAULTS_AND_LENDING
def test_nodes_that_do_not_boot_are_down_and_put_the_partition_in_protected_mode(
    leaves_pool_idle: Path, ptc: Any
) -> None:
    """A resume starts the nodes' machines; node-1..3's disks lost their init while the
    machines were off, so they cannot boot: the resume fails at the testbed's step, with its
    reason, the job is requeued and the nodes are back in the pool, their machines off. Three
    failed in a row (PROTECT_AFTER) put the partition in protected mode: `ptc elastic status`
    says why and since when, the Slurm partition is DOWN and the job waits. With init back and
    the nodes resumed, `ptc elastic unprotect` ends it and the job runs."""
    expdir = leaves_pool_idle
    broken = ["node-1", "node-2", "node-3"]
    wait_for("the nodes' machines off", lambda: not any(machines_running(broken).values()), 120, 5)
    moved: list[tuple[Path, Path]] = []
    try:
        for node in broken:
            container = f"ptc-{NAME}-{node}"
            root = subprocess.run(
                ["podman", "mount", container],
                capture_output=True, text=True, check=True, timeout=120,
            ).stdout.strip()  # fmt: skip
            init = Path(root) / "sbin" / "init"  # a symlink to systemd: renamed, never followed
            init.rename(init.with_name("init.ptc-test"))
            moved.append((init, init.with_name("init.ptc-test")))
        job_id = sbatch(expdir, "-N3 -w node-[1-3]", "true")
        for node in broken:
            _, reason = wait_for(
                f"{node} DOWN, not booted, back in the pool",
                lambda n=node: down_and_given_back(expdir, n),
                240,
            )
            assert reason.startswith("ptc resume: power on failed:"), reason
            assert "podman start" in reason or "did not start" in reason, reason
        wait_for(f"job {job_id} requeued, not lost", lambda: requeued(expdir, job_id), 120)
        assert not any(machines_running(broken).values())
    finally:
        for init, aside in moved:
            if os.path.lexists(aside):
                aside.rename(init)
        for node in broken:
            subprocess.run(["podman", "umount", f"ptc-{NAME}-{node}"], check=False, timeout=120)

    # protected mode: said by the status, applied to Slurm, and the job waits
    # (the resume reports to the manager once its nodes are given back)
    (began,) = wait_for(
        "the partition-protected event", lambda: events(expdir, "partition-protected"), 60, 2
    )
    assert began["data"]["partition"] == "slurm" and began["data"]["failures"] >= PROTECT_AFTER
    status = ptc("elastic", "status", NAME)
    assert status.returncode == 0, status.stderr
    said = " ".join(status.stderr.split())  # as one line, however the terminal wrapped it
    assert "partition slurm is in protected mode since" in said, said
    assert "resume(s) failed in a row" in said and "power on failed" in said, said
    assert f"ptc elastic unprotect {NAME} --partition slurm" in said, said
    wait_for("the Slurm partition DOWN", lambda: partition_state(expdir) == "DOWN", 60, 2)
    time.sleep(REPAIR_INTERVAL + 5)  # two rounds of the repair loop since the nodes went DOWN...
    # ... but starts no repair while the partition is protected (a repair is a resume too)
    assert not [e for e in events(expdir, "repair-started") if e["time"] >= began["time"]]
    ssh(expdir, "head", "scontrol update nodename=node-[1-3] state=resume")
    time.sleep(10)  # a partition that was UP would start the job within this
    assert job(expdir, job_id)["JobState"] == "PENDING"

    proc = ptc("elastic", "unprotect", NAME, "--partition", "slurm")
    assert proc.returncode == 0, proc.stderr
    assert "protected mode ended" in proc.stdout, proc.stdout
    again = ptc("elastic", "unprotect", NAME, "--partition", "slurm")
    assert "was not in protected mode" in again.stdout, again.stdout
    wait_for("the Slurm partition UP", lambda: partition_state(expdir) == "UP", 60, 2)
    assert wait_for(
        f"job {job_id} to complete once the nodes boot",
        lambda: sacct(expdir, job_id).get("state") == "COMPLETED",
        300,
    )
    (ended,) = events(expdir, "partition-unprotected")
    assert ended["data"] == {"partition": "slurm", "by": "admin"}


def partition_state(expdir: Path, partition: str = "main") -> str:
    line = ssh(expdir, "head", f"scontrol show partition -o {partition}").stdout
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv).get("State", "")


def test_ptc_verify_passes_with_the_pool_powered_down(leaves_pool_idle: Path, ptc: Any) -> None:
    """`ptc verify` of an elastic cluster: the checks that need slurmd skip the pool nodes Slurm
    holds powered down, and say why; everything else passes."""
    expdir = leaves_pool_idle
    assert all_back_in_pool(expdir)
    proc = ptc("verify", NAME)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    junit = sorted((expdir / "runs").glob("*-verify/junit.xml"))[-1]
    skipped = {
        case.get("name", ""): skip.get("message", "")
        for case in ElementTree.parse(junit).iter("testcase")
        for skip in case.iter("skipped")
    }
    for node in NODES:
        why = skipped.get(f"test_slurmd_active[ansible://{node}]", "")
        assert "powered down" in why, (node, why)


def test_tokens_never_reach_the_deploy_logs(cluster: Path) -> None:
    tokens = ssh(cluster, "head", f"cat {node_paths.ELASTIC_TOKENS_DIR}/*.token").stdout.split()
    assert len(tokens) >= 3
    runs = cluster / "runs"
    for path in runs.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert not any(t in text for t in tokens), f"a token is in {path}"


# -- the partition powers its machines -------------------------------------------------------
def machines_running(nodes: list[str]) -> dict[str, bool]:
    """Whether each node's container runs, as the host sees it (not over SSH)."""
    out = {}
    for node in nodes:
        proc = subprocess.run(
            ["podman", "inspect", "--format", "{{.State.Running}}", f"ptc-{NAME}-{node}"],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        out[node] = proc.stdout.strip() == "true"
    return out


def test_under_power_a_job_starts_the_pool_s_machines_and_the_suspend_stops_them(
    leaves_pool_idle: Path,
) -> None:
    """The default ``elastic_node_operation`` (power): the pool's machines run only while
    Slurm uses them.
    At rest the free pool's containers are stopped; a job's resume starts exactly its nodes'
    containers through the testbed's control service (the others stay stopped), and the
    suspend stops them again. Checked from the host, not over SSH."""
    expdir = leaves_pool_idle
    wait_for(
        "the pool's machines stopped at rest",
        lambda: not any(machines_running(NODES).values()),
        120,
        5,
    )
    job_id = sbatch(expdir, "-N2", until_mark("power", "srun hostname"))
    info = once_running(expdir, job_id)
    used = expand(expdir, info["NodeList"])
    running = machines_running(NODES)
    assert sorted(n for n, up in running.items() if up) == sorted(used), running
    mark(expdir, "power")
    done = completed(expdir, job_id, 240)
    assert done["exit"] == "0:0", done
    wait_for("the nodes back in the pool", lambda: all_back_in_pool(expdir), SUSPEND_TIME + 120)
    wait_for(
        "the used machines stopped again",
        lambda: not any(machines_running(used).values()),
        120,
        5,
    )


# -- a CloudLab head powering its own nodes, through the FAKE portal ------------------------
PORTAL = "127.0.0.1:8790"
PORTAL_DIR = "/root/ptc-fake-portal"
PORTAL_UNIT = "ptc-fake-cloudlab-portal"
PORTAL_UUID = "3f5e0a6c-0000-4000-8000-00000000c1ab"


def portal_operations(expdir: Path) -> list[tuple[str, str]]:
    """What the FAKE portal on the head was asked to do, in order: (node, start|stop)."""
    out = ssh(expdir, "head", f"cat {PORTAL_DIR}/operations.jsonl 2>/dev/null || true").stdout
    return [(e["node"], e["operation"]) for e in map(json.loads, out.splitlines())]


@pytest.fixture
def through_the_portal(leaves_pool_idle: Path, ptc: Any, tmp_path: Path) -> Iterator[Path]:
    """The experiment as a CloudLab one whose head powers its nodes through the Portal API: the
    FAKE portal (tests/support/fake_cloudlab_portal.py) runs on the head's loopback and carries
    each start and stop out on the local testbed's machine; the head is deployed with
    elastic_node_control=cloudlab_portal and a token scoped to the experiment. Afterwards the
    head is deployed back as the module had it."""
    expdir = leaves_pool_idle
    token, broad = (f"fake-{kind}-{time.time_ns()}" for kind in ("scoped", "global"))
    later = "2099-01-01T00:00:00+00:00"
    config = {
        "experiment": {"id": PORTAL_UUID, "project": "ptc", "name": NAME},
        "tokens": {
            token: {"scope": "experiment", "scope_value": PORTAL_UUID, "expires_at": later},
            broad: {"scope": "global", "scope_value": None, "expires_at": later},
        },
    }
    config_file = f"{PORTAL_DIR}/config.json"
    # over stdin, like any credential: never on a command line
    for path, text in ((config_file, json.dumps(config)), (f"{PORTAL_DIR}/global.token", broad)):
        done = execute(
            expdir / "inventory/ssh_config",
            "head",
            f"install -d -m 0700 {PORTAL_DIR} && umask 077 && cat > {path}",
            stdin=text,
            timeout=60,
        )
        check(done, label=f"writing the fake portal's {path} on the head")
    repo = node_paths.REPOSITORY
    ssh(
        expdir,
        "head",
        f"systemd-run --unit {PORTAL_UNIT} --collect "
        f"-p Environment=PYTHONPATH={repo}:{repo}/tests "
        f"{node_paths.ELASTIC_VENV}/bin/python {repo}/tests/support/fake_cloudlab_portal.py "
        f"--config {config_file} --log {PORTAL_DIR}/operations.jsonl --listen {PORTAL}",
    )
    (tmp_path / "portal.token").write_text(token)
    (tmp_path / "portal.token").chmod(0o600)
    portal_vars = [
        "elastic_node_control=cloudlab_portal",
        f"elastic_cloudlab_portal_url=http://{PORTAL}",
        f"elastic_cloudlab_portal_token_src={tmp_path / 'portal.token'}",
        f"elastic_cloudlab_experiment=ptc,{NAME}",
        # the sites above are the local testbed's: through the portal, the pool is in no site
        "elastic_sites_file=",
    ]
    try:
        deployed = ptc("deploy", NAME, "--limit", "head",
                       *itertools.chain.from_iterable(("-e", v) for v in EXTRAVARS + portal_vars))  # fmt: skip
        assert deployed.returncode == 0, deployed.stderr[-4000:]
        yield expdir
    finally:
        ssh(expdir, "head", "scancel -u ptc", check=False)
        with contextlib.suppress(AssertionError):
            wait_for("every node back in the pool", lambda: all_back_in_pool(expdir), 240, 5)
        back = ptc("deploy", NAME, "--limit", "head",
                   *itertools.chain.from_iterable(("-e", v) for v in EXTRAVARS))  # fmt: skip
        ssh(expdir, "head", f"systemctl stop {PORTAL_UNIT}; rm -rf {PORTAL_DIR}", check=False)
        assert back.returncode == 0, back.stderr[-4000:]


def test_through_the_cloudlab_portal_a_job_starts_a_stopped_node_and_the_suspend_stops_it(
    through_the_portal: Path,
) -> None:
    """A head that reaches its nodes only through CloudLab's Portal API (the FAKE portal, which
    maps each operation onto the local testbed's machine): the deploy accepted the token scoped
    to the experiment; a job's resume asks the portal to start a stopped node, whose machine
    then runs, and the job completes; the suspend asks it to stop the node, and its machine
    stops. A token of global scope is refused by the check the deploy runs, naming it."""
    expdir = through_the_portal
    client = ssh(expdir, "head", f"cat {node_paths.SLURM_CLIENT_CONFIG}").stdout
    assert "kind: cloudlab_portal" in client, client
    wait_for(
        "the pool's machines stopped at rest",
        lambda: not any(machines_running(NODES).values()),
        120,
        5,
    )
    before = portal_operations(expdir)
    job_id = sbatch(expdir, "-N1", until_mark("portal", "hostname"))
    info = once_running(expdir, job_id)
    (node,) = expand(expdir, info["NodeList"])
    assert machines_running([node])[node]
    assert portal_operations(expdir)[len(before) :] == [(node, "start")]
    mark(expdir, "portal")
    done = completed(expdir, job_id, 240)
    assert done["exit"] == "0:0", done
    wait_for("the node back in the pool", lambda: all_back_in_pool(expdir), SUSPEND_TIME + 120)
    wait_for(f"{node}'s machine stopped", lambda: not machines_running([node])[node], 120, 5)
    assert portal_operations(expdir)[len(before) :] == [(node, "start"), (node, "stop")]
    # the deploy's check, with a token of global scope instead
    refused = ssh(
        expdir,
        "head",
        f"sed 's#^  token_file: .*#  token_file: {PORTAL_DIR}/global.token#' "
        f"{node_paths.SLURM_CLIENT_CONFIG} > {PORTAL_DIR}/broad.yml && "
        f"PYTHONPATH={node_paths.REPOSITORY} {node_paths.ELASTIC_VENV}/bin/python -m elastic.slurm "
        f"--config {PORTAL_DIR}/broad.yml check-node-control",
        check=False,
    )
    assert refused.returncode == 3, refused
    said = " ".join(refused.stderr.split())
    assert f"the CloudLab portal token in {PORTAL_DIR}/global.token has scope 'global'" in said


# -- a pool across two sites: the thesis's Ch. 2 downscaling, live on Slurm ----------------
@FAULTS_AND_LENDING
def test_each_node_has_its_site_as_a_feature_and_a_job_asked_for_a_site_runs_there(
    leaves_pool_idle: Path, ptc: Any, tmp_path: Path
) -> None:
    """The sites file given at deploy: the controller checks each site's provider, each node
    carries its site as a Slurm feature, and a job asking for the dear site (--constraint)
    resumes one of its nodes through that site's provider and runs there. A sites file naming
    a node the experiment does not have is refused by `ptc deploy`, naming the file, the site
    and the field, before anything runs: the head keeps the deployed sites."""
    expdir = leaves_pool_idle
    checked = ssh(
        expdir,
        "head",
        f"PYTHONPATH={node_paths.REPOSITORY} {node_paths.ELASTIC_VENV}/bin/python -m elastic.slurm"
        f" --config {node_paths.SLURM_CLIENT_CONFIG} check-node-control",
    ).stdout
    assert "site cheap (local, power)" in checked and "site dear (local, power)" in checked, checked
    shown = ssh(expdir, "head", "sinfo --noheader --Node --format='%N %f'").stdout
    features = dict(line.split() for line in shown.splitlines())
    assert {n: features[n] for n in NODES} == {
        **dict.fromkeys(CHEAP, "cheap"),
        **dict.fromkeys(DEAR, "dear"),
    }, shown
    job_id = sbatch(expdir, "-N1 --constraint=dear -t 5", "hostname")
    done = completed(expdir, job_id, 300)
    assert set(expand(expdir, done["nodes"])) <= set(DEAR), done

    bad = tmp_path / "sites.yml"
    bad.write_text(SITES.replace("node-[2-3]", "node-[3-4]"))
    refused = ptc("deploy", NAME, "--limit", "head", "-e", "ptc_elastic=true",
                  "-e", f"elastic_sites_file={bad}")  # fmt: skip
    assert refused.returncode != 0
    said = " ".join(refused.stderr.split())
    assert f"sites file {bad}: sites[1] (dear): field nodes: node-4 is not a compute node" in (
        said
    ), refused.stderr
    assert ssh(expdir, "head", f"cat {node_paths.SITES_FILE}").stdout == SITES


@FAULTS_AND_LENDING
def test_a_growth_policy_grows_the_pool_onto_the_site_it_picks(
    leaves_pool_idle: Path, ptc: Any, tmp_path: Path
) -> None:
    """Slurm alone resumes node-0 first; with the sites' prices the other way round (node-2/3
    cheaper) and the growth policy `cheapest`, the dearer site's free nodes are held back
    (`ptc-gated-paid`), so a one-node job resumes a node of the cheaper site, and a three-node
    job opens the dearer site for the node the cheaper one lacks. Deployed on the head alone,
    and back afterwards."""
    expdir = leaves_pool_idle
    sites = tmp_path / "growth-sites.yml"
    sites.write_text(
        "sites:\n"
        "  - {name: paid, price: 2, nodes: 'node-[0-1]'}\n"
        "  - {name: spare, price: 1, nodes: 'node-[2-3]'}\n"
    )
    growth = [*EXTRAVARS, f"elastic_sites_file={sites}", "elastic_growth_policy=cheapest"]
    deploy(ptc, "head", growth)
    try:
        wait_for(
            "the dearer site held back",
            lambda: reservations(expdir) == {"ptc-gated-paid": CHEAP},
            60,
        )
        one = sbatch(expdir, "-N1 -t 5", "hostname")
        done = completed(expdir, one, 300)
        assert set(expand(expdir, done["nodes"])) <= set(DEAR), done
        started = time.time()
        three = sbatch(expdir, "-N3 -t 5", "hostname")
        done = completed(expdir, three, 300)
        nodes = set(expand(expdir, done["nodes"]))
        assert set(DEAR) <= nodes and len(nodes & set(CHEAP)) == 1, done
        print(f"three-node job across both sites: completed {time.time() - started:.0f} s "
              "after its submission")  # fmt: skip
    finally:
        deploy(ptc, "head", EXTRAVARS)
    wait_for("the sites let go", lambda: reservations(expdir) == {}, 60)


def rebalance(ptc: Any, sites: Path, policy: str) -> dict[str, Any]:
    """One round on the head from the workstation, as an operator runs it; its JSON report."""
    shown = ptc("elastic", "rebalance", NAME, "--sites", str(sites), "--policy", policy, "--json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    report: dict[str, Any] = json.loads(shown.stdout.strip().splitlines()[-1])
    return report


@pytest.fixture
def two_sites(leaves_pool_idle: Path, tmp_path: Path) -> Iterator[Path]:
    """The pool as two sites, in the test's sites file (``tmp_path/sites.yml``): node-0/1
    cheap (wanted: both), node-2/3 twice the price (wanted: none). Afterwards the nodes the
    rounds drained are given back."""
    expdir = leaves_pool_idle
    (tmp_path / "sites.yml").write_text(SITES)
    try:
        yield expdir
    finally:
        ssh(expdir, "head", "scancel -u ptc", check=False)
        ssh(expdir, "head", "scontrol update NodeName=node-[0-3] State=UNDRAIN", check=False)


def fill_both_sites(expdir: Path, name: str) -> list[str]:
    """One whole-node job on each of the four nodes, each waiting for its mark (run again after a
    requeue, a job goes straight on)."""
    jobs = [
        sbatch(expdir, "-N1 --exclusive -t 10", until_mark(f"{name}-{i}", "sleep 2"))
        for i in range(4)
    ]
    wait_for(
        "a job running on every node",
        lambda: all(job(expdir, j).get("JobState") == "RUNNING" for j in jobs),
        300,
    )
    return jobs


def node_of(expdir: Path, job_id: str) -> str:
    return job(expdir, job_id)["NodeList"]


def test_ap_100_moves_the_pool_off_the_dear_site_in_one_round_and_every_job_completes(
    two_sites: Path, ptc: Any, tmp_path: Path
) -> None:
    """An imbalanced start (jobs on both sites, none wanted on the dear one). One AP-100 round
    requeues the dear site's jobs and powers its nodes down; the requeued jobs then finish on
    the cheap site. Each reclamation is logged with its excess cost and discarded work."""
    expdir = two_sites
    jobs = fill_both_sites(expdir, "ap")
    on_dear = {j for j in jobs if node_of(expdir, j) in DEAR}
    assert len(on_dear) == 2, {j: node_of(expdir, j) for j in jobs}
    report = rebalance(ptc, tmp_path / "sites.yml", "AP-100")
    assert report["live_before"] == {"cheap": 2, "dear": 2}, report
    assert sorted(r["node"] for r in report["terminated"]) == DEAR, report
    assert set(report["requeued"]) == on_dear, report
    for reclaimed in report["terminated"]:
        assert reclaimed["excess_cost"] == 2.0, reclaimed  # price 2, under an hour up
        assert reclaimed["discarded_s"] >= 0, reclaimed
    # After one round the dear site runs nothing, and Slurm does not start it again
    wait_for(
        "the dear site powered down",
        lambda: all(slurm_nodes(expdir)[n][0] in ("drained~", "drained%") for n in DEAR),
        180,
        5,
    )
    for i in range(4):
        mark(expdir, f"ap-{i}")
    for j in jobs:
        done = completed(expdir, j, 300, 5)
        assert set(expand(expdir, done["nodes"])) <= set(CHEAP) or j not in on_dear, done
    assert all(slurm_nodes(expdir)[n][0].startswith("drained") for n in DEAR)
    logged = ssh(expdir, "head", f"tail -n 1 {node_paths.REBALANCE_LOG}").stdout
    assert json.loads(logged)["terminated"] == report["terminated"]


def test_fo_drains_the_dear_site_kills_nothing_and_powers_it_down_once_idle(
    two_sites: Path, ptc: Any, tmp_path: Path
) -> None:
    """FO on the same start: the dear site's nodes are drained and their jobs finish where they
    are (no requeue); the next round, the head's own unit, powers the idle, drained nodes down.
    A sites file the round refuses is named with its field, and changes nothing on the head."""
    expdir = two_sites
    sites = tmp_path / "sites.yml"
    bad = tmp_path / "bad-sites.yml"
    bad.write_text(SITES.replace("desired: 0", "desired: 3"))
    refused = ptc("elastic", "rebalance", NAME, "--sites", str(bad), "--policy", "FO")
    assert refused.returncode != 0
    assert f"{bad}: sites[1] (dear): field desired: 3 is more than max_nodes 2" in " ".join(
        refused.stderr.split()
    ), refused.stderr
    jobs = fill_both_sites(expdir, "fo")
    first = rebalance(ptc, sites, "FO")
    assert first["terminated"] == [] and first["requeued"] == [], first
    assert sorted(first["drained"]) == DEAR, first
    states = slurm_nodes(expdir)
    assert all(states[n][0] == "draining" for n in DEAR), states
    for i in range(4):
        mark(expdir, f"fo-{i}")
    for j in jobs:
        wait_for(
            f"job {j} to complete",
            lambda j=j: sacct(expdir, j).get("state") == "COMPLETED",
            300,
            5,
        )
        assert job(expdir, j).get("Restarts") == "0", job(expdir, j)
    current = ssh(expdir, "head", f"cat {node_paths.SITES_FILE}").stdout
    assert current == SITES, current
    # the next round is the head's own: the role's unit (its timer's), over the sites file the
    # command left there, with the role's policy (FO)
    ssh(expdir, "head", "systemctl start ptc-elastic-rebalance.service")
    second = json.loads(ssh(expdir, "head", f"tail -n 1 {node_paths.REBALANCE_LOG}").stdout)
    assert second["time"] > first["time"] and second["policy"] == first["policy"], second
    assert second["requeued"] == [] and second["discarded_s"] == 0, second
    wait_for(
        "the dear site powered down",
        lambda: all(slurm_nodes(expdir)[n][0] in ("drained~", "drained%") for n in DEAR),
        180,
        5,
    )


# -- a pool across the local testbed and a FAKE EC2 region, through Slurm's own hooks --------
CLOUD = ["ec2-0", "ec2-1"]
HERE, THERE = CHEAP, DEAR  # the burst sites: here (price 1) and dear (3), the local testbed's
BOOT_DELAY_S = 5
ORPHAN_GRACE_S = 30
SPOT_NOTICE_S = 45  # EC2 gives 120


def burst_sites(region: dict[str, Any]) -> str:
    """The pool as three sites: node-0/1 here (the cheapest), two instances of the FAKE EC2
    region (wanted: none), node-2/3 the dearest. Growth is cheapest first."""
    ids = region["ids"]
    return (
        "sites:\n"
        "  - {name: here, price: 1, desired: 2, nodes: 'node-[0-1]'}\n"
        "  - name: cloud\n"
        "    provider: ec2\n"
        "    price: 2\n"
        "    desired: 0\n"
        "    nodes: 'ec2-[0-1]'\n"
        "    operation: terminate\n"
        f"    ec2: {{endpoint_url: '{fake_ec2_api.ENDPOINT}', region: us-east-1,"
        f" image_id: {ids['image_id']}, instance_type: t3.micro, subnet_id: {ids['subnet_id']},"
        " cpus: 1, memory_mb: 1000}\n"
        "  - {name: dear, price: 3, desired: 0, nodes: 'node-[2-3]'}\n"
    )


@pytest.fixture
def burst(leaves_pool_idle: Path, ptc: Any, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """The experiment with a FAKE EC2 region (``ptc fake-ec2``) and the head deployed with the
    burst sites, growth cheapest first, and the reconciler on a short timer; the testbed has
    room for the two instances. Afterwards every instance is ended, the head is deployed as the
    module's again and the region stops. The sites file's path and the region's report."""
    expdir = leaves_pool_idle
    before = capacity.settings().machines
    capacity.set_machines(before + len(CLOUD))
    started = ptc("fake-ec2", "start", NAME, "--boot-delay", str(BOOT_DELAY_S))
    assert started.returncode == 0, started.stdout + started.stderr
    region = json.loads((expdir / "fake-ec2" / "status.json").read_text())
    sites = tmp_path / "burst-sites.yml"
    sites.write_text(burst_sites(region))
    burst_vars = [
        *EXTRAVARS,
        f"elastic_sites_file={sites}",
        "elastic_growth_policy=cheapest",
        f"elastic_ec2_credentials_src={expdir / 'fake-ec2' / 'credentials'}",
        f"elastic_ec2_cluster={NAME}",
        "elastic_ec2_sync_interval=10",
        f"elastic_ec2_orphan_grace={ORPHAN_GRACE_S}",
    ]
    try:
        deploy(ptc, "head", burst_vars)
        yield expdir, sites
    finally:
        ssh(expdir, "head", "scancel -u ptc", check=False)
        with contextlib.suppress(AssertionError):
            wait_for("the instances ended", lambda: not live_instances(expdir), 180, 5)
        deploy(ptc, "head", EXTRAVARS)
        stopped = ptc("fake-ec2", "stop", NAME)
        assert stopped.returncode == 0, stopped.stderr
        capacity.set_machines(before)
    wait_for("the sites let go", lambda: reservations(expdir) == {}, 60)


def head_file(expdir: Path, path: str) -> bytes:
    """A file of the head's, in memory only (the munge key among them)."""
    done = execute(expdir / "inventory/ssh_config", "head", f"cat {path}", timeout=60)
    return check(done, label=f"reading {path} on the head").stdout


def live_instances(expdir: Path) -> dict[str, str]:
    """The region's instances not terminated, by their ``ptc:node`` tag: their state."""
    found = fake_ec2_api.instances(expdir, cluster=NAME)
    return {
        next(t["Value"] for t in i.get("Tags", []) if t["Key"] == "ptc:node"): i["State"]["Name"]
        for i in found
        if i["State"]["Name"] not in ("terminated", "shutting-down")
    }


def site_pauses(expdir: Path) -> dict[str, dict[str, Any]]:
    """The sites paused now or due a probe, as the controller keeps them (the breaker's file)."""
    shown = ssh(expdir, "head", f"cat {node_paths.ELASTIC_STATE_DIR}/site-pauses.json", check=False)
    return dict(json.loads(shown.stdout)) if shown.stdout.strip() else {}


def states_while(expdir: Path, seen: dict[str, set[str]]) -> dict[str, tuple[str, str]]:
    """Slurm's nodes now; each node's state is also added to ``seen``."""
    now = slurm_nodes(expdir)
    for node, (state, _) in now.items():
        seen.setdefault(node, set()).add(state)
    return now


def test_a_job_bursts_to_a_fake_ec2_region_through_slurm_s_hooks_and_falls_back_on_capacity(
    burst: tuple[Path, Path], ptc: Any
) -> None:
    """A pool of a local site (node-0/1) and a site of EC2 instances (ec2-0/1, from a FAKE EC2
    region: moto's API, each instance a fresh machine of the prepared image that runs its own
    user data). A 4-node job resumes the local machines and, through ResumeProgram, launches two
    instances; they join Slurm with nothing of the cluster on them but what their user data
    fetched (the munge key through a join token, slurm.conf configless) and the job's step runs
    on all four. The idle suspend terminates the instances and stops the machines.

    Then EC2 has no capacity: a job the growth policy sends to EC2 runs on the dear local site
    instead, no node DOWN, and the EC2 site is paused; after the pause a probe launches an
    instance again. An instance launched behind ptc's back is terminated by the reconciler. An
    FO round drains the EC2 site's running node, its job completes there, and the instance ends.
    A spot interruption with notice requeues the job on the interrupted node before its end."""
    expdir, sites = burst
    shown = ssh(expdir, "head", "sinfo --noheader --Node --format='%N %f'").stdout
    assert {
        n: f for n, f in (ln.split() for ln in shown.splitlines()) if n in CLOUD
    } == dict.fromkeys(CLOUD, "cloud"), shown
    assert live_instances(expdir) == {}

    # 1. four nodes: two local machines and two instances, launched by ResumeProgram
    started = time.time()
    four = sbatch(expdir, "-N4 -C 'here|cloud' -t 10", "srun hostname | sort")
    done = completed(expdir, four, 300)
    assert sorted(expand(expdir, done["nodes"])) == sorted(HERE + CLOUD), done
    printed = ssh(expdir, "head", f"cat /home/ptc/slurm-{four}.out").stdout.split()
    assert printed == sorted(CLOUD + HERE), printed
    print(f"4-node job across the local site and EC2: completed {time.time() - started:.0f} s "
          "after its submission")  # fmt: skip
    launched = fake_ec2_api.instances(expdir, cluster=NAME, site="cloud")
    assert (
        sorted(t["Value"] for i in launched for t in i["Tags"] if t["Key"] == "ptc:node") == CLOUD
    )
    # nothing secret in an instance's user data: the key came from the controller
    key = base64.b64encode(head_file(expdir, "/etc/munge/munge.key")).decode()
    for instance in launched:
        data = fake_ec2_api.call(
            expdir, "describe_instance_attribute", InstanceId=instance["InstanceId"],
            Attribute="userData",
        )["UserData"]["Value"]  # fmt: skip
        text = base64.b64decode(data).decode()
        assert key not in text and key[:24] not in text and "/v1/join/" in text
    wait_for("the nodes back in the pool", lambda: all_back_in_pool(expdir), SUSPEND_TIME + 180, 5)
    wait_for("the instances terminated", lambda: live_instances(expdir) == {}, 60, 5)
    assert {i["State"]["Name"] for i in fake_ec2_api.instances(expdir, cluster=NAME)} == {
        "terminated"
    }
    wait_for("the local machines stopped", lambda: not any(machines_running(HERE).values()), 120, 5)

    # 2. no capacity on EC2: the job runs on the dear local site, and the EC2 site is paused
    hold = sbatch(expdir, "-N2 --exclusive -C here -t 10", until_mark("burst-hold"))
    wait_for(f"job {hold} running", lambda: job(expdir, hold).get("JobState") == "RUNNING", 300)
    fault = ptc("fake-ec2", "fault", "capacity", NAME, "--until-cleared")
    assert fault.returncode == 0, fault.stderr
    seen: dict[str, set[str]] = {}
    spilled = sbatch(expdir, "-N2 -t 10", "srun hostname")
    try:
        paused = wait_for(
            "the EC2 site paused",
            lambda: states_while(expdir, seen) and reservations(expdir).get("ptc-paused-cloud"),
            240,
        )
        assert sorted(paused) == CLOUD, paused
        done = wait_for(
            f"job {spilled} to complete",
            lambda: (
                states_while(expdir, seen)
                and (a := sacct(expdir, spilled)).get("state") == "COMPLETED"
                and a
            ),
            300,
        )
    finally:
        cleared = ptc("fake-ec2", "fault", "capacity", NAME, "--clear")
        assert cleared.returncode == 0, cleared.stderr
    assert sorted(expand(expdir, done["nodes"])) == THERE, done
    down = {n: s for n, s in seen.items() if any(x.startswith("down") for x in s)}
    assert down == {}, down
    mark(expdir, "burst-hold")
    completed(expdir, hold, 120)
    # the pause is on the controller's disk, with EC2's answer; after it (20 s here), a job
    # for the EC2 site is its probe, and it works: the site is whole again
    paused_for = site_pauses(expdir)
    assert "InsufficientInstanceCapacity" in paused_for["cloud"]["reason"], paused_for
    wait_for(
        "the pause over",
        lambda: time.time() > site_pauses(expdir).get("cloud", {"until": 0})["until"],
        180,
        5,
    )
    probe = sbatch(expdir, "-N1 -C cloud -t 10", "hostname")
    done = completed(expdir, probe, 300)
    assert expand(expdir, done["nodes"])[0] in CLOUD, done
    assert "cloud" not in site_pauses(expdir)

    # 3. an instance no node stands for is terminated by the reconciler
    region = json.loads((expdir / "fake-ec2" / "status.json").read_text())["ids"]
    (stray,) = fake_ec2_api.call(
        expdir, "run_instances", ImageId=region["image_id"], SubnetId=region["subnet_id"],
        InstanceType="t3.micro", MinCount=1, MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [
            {"Key": "ptc:cluster", "Value": NAME}, {"Key": "ptc:site", "Value": "cloud"},
            {"Key": "ptc:node", "Value": "stray-1"}]}],
    )["Instances"]  # fmt: skip
    wait_for(
        "the stray instance terminated",
        lambda: "stray-1" not in live_instances(expdir),
        ORPHAN_GRACE_S + 120,
        5,
    )
    journal = ssh(expdir, "head", "journalctl -q -o cat -u ptc-elastic-slurm-client").stdout
    assert stray["InstanceId"] in journal, journal[-3000:]

    # 4. FO: the EC2 site (wanted: none) is drained; its job completes there, then it ends
    wait_for("the pool at rest", lambda: all_back_in_pool(expdir), SUSPEND_TIME + 180, 5)
    onsite = sbatch(expdir, "-N1 -C cloud -t 10", until_mark("burst-fo", "hostname"))
    info = once_running(expdir, onsite)
    node = info["NodeList"]
    report = rebalance(ptc, sites, "FO")
    assert report["drained"] == [node] and report["requeued"] == [], report
    assert report["terminated"] == [], report
    assert slurm_nodes(expdir)[node][0] == "draining"
    mark(expdir, "burst-fo")
    done = completed(expdir, onsite, 120)
    assert done["nodes"] == node and job(expdir, onsite).get("Restarts") == "0", done
    ssh(expdir, "head", "systemctl start ptc-elastic-rebalance.service")
    wait_for(f"{node}'s instance terminated", lambda: node not in live_instances(expdir), 180, 5)
    ssh(expdir, "head", f"scontrol update NodeName={node} State=UNDRAIN", check=False)

    # 5. a spot interruption with notice: the node drains itself from its metadata service, and
    # the reclamation that follows requeues its job before the instance ends
    spot = sbatch(expdir, "-N1 -C cloud -t 10", until_mark("burst-spot", "hostname"))
    info = once_running(expdir, spot)
    node = info["NodeList"]
    asked = time.time()
    interrupted = ptc("fake-ec2", "fault", "interrupt", NAME, node, "--notice", str(SPOT_NOTICE_S))
    assert interrupted.returncode == 0, interrupted.stderr
    started = wait_for(
        "a reclamation on the spot notice",
        lambda: [e for e in events(expdir, "reclamation-started") if e["data"].get("notice")],
        SPOT_NOTICE_S,
        2,
    )[-1]["data"]
    assert started["notice"] == "ec2 spot terminate" and started["chosen"] == [node], started
    # EC2's time is to the second
    assert asked + SPOT_NOTICE_S - 1 <= started["deadline"] <= time.time() + SPOT_NOTICE_S + 1
    rec_id = started["reclamation"]
    requeued = wait_for(
        f"job {spot} requeued by {rec_id}",
        lambda: [e for e in events(expdir, "jobs-requeued") if e["data"]["reclamation"] == rec_id],
        SPOT_NOTICE_S + 60,
        2,
    )  # fmt: skip
    assert [j["job_id"] for e in requeued for j in e["data"]["jobs"]] == [spot], requeued
    assert all(j["requeued"] for e in requeued for j in e["data"]["jobs"]), requeued
    assert requeued[0]["time"] < started["deadline"], (requeued, started)
    done = completed(expdir, spot, 300)
    assert job(expdir, spot).get("Restarts") == "1", done


# -- a running job that grows and shrinks (E-HPC's expand and contract) ----------------------
def as_job_owner(expdir: Path) -> Runner:
    """Slurm commands on the head as the job's owner, as the job itself would run them."""

    def run(argv: Sequence[str]) -> str:
        done = execute(
            expdir / "inventory/ssh_config", "head", as_ptc(shlex.join(argv)), timeout=300
        )
        if done.returncode != 0:
            raise SlurmCommandError(argv, done.returncode, done.error_text + done.text)
        return done.text

    return run


def test_a_running_job_expands_from_1_to_3_nodes_runs_a_step_on_all_3_and_contracts(
    leaves_pool_idle: Path,
) -> None:
    """A 1-node job grows to 3 through ``ptc-elastic expand`` on the head (the 2 new nodes
    resumed from the powered-down pool); the command writes the host file and SIGUSR1s the
    batch script, whose trap copies it. ``srun -N3`` runs on all 3, and the job shrinks back to
    its batch host through the Python API. Then the job resizes itself from its batch host, a
    compute node: ``ptc-elastic expand --to 2``, a step on both, ``contract --by 1``, and a
    two-stage elasticity plan (2 nodes, then 1); it completes. sacct shows each step on its
    width, and the pool gets the nodes back. A size the partition cannot hold, or a shrink to no
    node, is refused, naming the parameter, and the job runs on unchanged."""
    expdir = leaves_pool_idle
    out = f"{MARKS}/{RUN}-resize"
    hosts, seen = f"{out}-hosts", f"{out}-usr1-seen"
    plan = f"{out}-plan.yml"
    text = "workflow:\n  command: hostname\nwide:\n  nodes: 2\nnarrow:\n  nodes: 1\n"
    ssh(expdir, "head", as_ptc(f"printf {shlex.quote(text)} > {plan}"))
    # the job sources its new allocation's settings before srun, as with Slurm's own script
    env = f"{out}-self-env.sh"
    by_itself = (
        f"ptc-elastic expand --to 2 --hostfile {out}-self-hosts --env {env} > {out}-self-grown; "
        f". {env}; srun -N2 hostname > {out}-self-step; "
        f"ptc-elastic contract --by 1 --env {env} > {out}-self-contracted; . {env}; "
        f"ptc-elastic plan --plan {plan} > {out}-plan-run; "
        f"ls {MARKS}/../slurm_job_* 2>/dev/null | wc -l > {out}-litter"
    )
    script = f"set -e; trap 'cp {hosts} {seen}' USR1; " + until_mark("resize", by_itself)
    job_id = sbatch(expdir, "-N1 -t 10", script)
    first = wait_for(
        f"job {job_id} to run",
        lambda: (j := job(expdir, job_id)).get("JobState") == "RUNNING" and j["NodeList"],
        300,
    )
    refused = ssh(expdir, "head", as_ptc(f"ptc-elastic expand --job {job_id} --to 5"), check=False)
    assert refused.returncode != 0, refused
    assert "--to: 5 is more than partition main's 4 node(s)" in refused.stderr, refused.stderr
    resizer = Resizer(as_job_owner(expdir), wait_for_nodes_s=60)
    with pytest.raises(ResizeRefused, match=rf"^--by: 1 would leave job {job_id} with 0 node"):
        resizer.contract(job_id, 1)
    assert job(expdir, job_id)["NodeList"] == first

    grown = ssh(
        expdir,
        "head",
        as_ptc(f"ptc-elastic expand --job {job_id} --to 3 --hostfile {hosts} --notify"),
    ).stdout.split()
    assert len(grown) == 3 and grown[0] == first, grown
    told = wait_for(
        "the batch script's USR1 trap",
        lambda: ssh(expdir, "head", f"cat {seen}", check=False).stdout,
        30,
    )
    assert told.split() == grown, told
    step = ssh(expdir, "head", as_ptc(f"srun --jobid={job_id} -N3 hostname"))
    assert sorted(step.stdout.split()) == sorted(grown), step.stdout

    assert resizer.contract(job_id, 2).nodes == (first,)
    assert job(expdir, job_id)["NodeList"] == first

    # the job's own turn, on its batch host
    mark(expdir, "resize")
    done = completed(expdir, job_id, 300)
    assert (done["nodes"], done["exit"]) == (first, "0:0"), done
    read = ssh(expdir, "head", f"cd {MARKS} && head -v -n 20 {RUN}-resize-*").stdout
    self_grown = ssh(expdir, "head", f"cat {out}-self-grown").stdout.split()
    assert len(self_grown) == 2 and self_grown[0] == first, read
    assert ssh(expdir, "head", f"cat {out}-self-hosts").stdout.split() == self_grown, read
    assert sorted(ssh(expdir, "head", f"cat {out}-self-step").stdout.split()) == sorted(
        self_grown
    ), read
    assert ssh(expdir, "head", f"cat {out}-self-contracted").stdout.split() == [first], read
    # Slurm's own resize scripts stayed in ptc-elastic's scratch directory, not the job's
    assert ssh(expdir, "head", f"cat {out}-litter").stdout.strip() == "0", read
    ran = ssh(expdir, "head", f"cat {out}-plan-run").stdout
    stages = [json.loads(line) for line in ran.splitlines()]
    assert [(s["stage"], s["nodes"], len(s["hosts"])) for s in stages] == [
        ("wide", 2, 2), ("narrow", 1, 1),
    ], ran  # fmt: skip
    assert stages[1]["hosts"] == [first], ran
    steps = ssh(
        expdir, "head", f"sacct -n -P -j {job_id} --format=JobID,State,NNodes"
    ).stdout.split()
    widths = [s for s in steps if s.split("|")[0].partition(".")[2].isdigit()]  # the steps
    assert widths == [
        f"{job_id}.0|COMPLETED|3", f"{job_id}.1|COMPLETED|2",
        f"{job_id}.2|COMPLETED|2", f"{job_id}.3|COMPLETED|1",
    ], steps  # fmt: skip
    wait_for("the nodes back in the pool", lambda: all_back_in_pool(expdir), SUSPEND_TIME + 150)


@FAULTS_AND_LENDING
def test_a_reclamation_while_a_job_is_grown_takes_its_nodes_and_leaves_it_its_grace(
    leaves_pool_idle: Path, ptc: Any
) -> None:
    """A 1-node job grown to the partition's 4 nodes (E-HPC's expand): the preemption vector
    counts the job on all 4 of its current nodes, so a reclamation of one node takes one of the
    job's, and the job is requeued only at the grace period's end, as any job is. Requeued, it
    runs again and completes: Slurm 22.05 would start a resized job again before its old batch
    step ended, then kill it, so the client holds it back for a while (held, then released
    with a begin time ahead)."""
    expdir = leaves_pool_idle
    job_id = sbatch(expdir, "-N1", until_mark("grown"))
    wait_for(f"job {job_id} to run", lambda: job(expdir, job_id).get("JobState") == "RUNNING", 300)
    grown = Resizer(as_job_owner(expdir), wait_for_nodes_s=60).expand(job_id, len(NODES)).nodes
    assert sorted(grown) == NODES, grown
    # a PV of the grown job, not one taken while the helper allocation held the new nodes
    wait_for_pv_covering(expdir, NODES, after=time.time())
    proc = ptc("elastic", "reclaim", NAME, "--count", "1", "--grace", "20")
    assert proc.returncode == 0, proc.stderr
    started = events(expdir, "reclamation-started")[-1]
    rec_id = started["data"]["reclamation"]
    assert [sorted(j["nodes"]) for j in started["data"]["pv"]["jobs"]] == [NODES], started
    assert [j["job_id"] for j in started["data"]["jobs"]] == [job_id], started
    assert len(started["data"]["chosen"]) == 1 and started["data"]["chosen"][0] in NODES
    finished_at_its_deadline(expdir, rec_id)  # the job kept its nodes to the grace's end
    requeued = [e for e in events(expdir, "jobs-requeued") if e["data"]["reclamation"] == rec_id]
    assert [j["job_id"] for e in requeued for j in e["data"]["jobs"]] == [job_id], requeued
    done = completed(expdir, job_id, 300)
    assert done["exit"] == "0:0", done


# -- the Part-Time Cloud: a pool node lent to a second experiment, and given back -------------
def node_names(expdir: Path) -> list[str]:
    from elastic.profile import rspec

    manifest = rspec.parse_manifest((expdir / "manifest.xml").read_bytes())
    return [n.client_id for n in manifest.nodes]


def loans(expdir: Path) -> dict[str, Any]:
    path = expdir / "loans.json"
    return dict(json.loads(path.read_text())["loans"]) if path.is_file() else {}


@pytest.fixture(scope="module")
def lendee(cluster: Path, experiment_factory: Callable[..., Path], ptc: Any) -> Path:
    """The testbed's other user: a second experiment, 1+1, never deployed. Its head may reach
    its nodes over SSH with the experiment's key, as a user's own key would."""
    expdir = experiment_factory(LENDEE, "profiles/slurm_cluster.py", "computeNodeCount=1")
    proc = ptc("put", expdir.name, "head", str(expdir / "ssh/id_ed25519"), "/root/.ssh/id_ed25519")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ssh(expdir, "head", "chmod 600 /root/.ssh/id_ed25519")
    return expdir


def lend(expdir: Path, lendee: Path, ptc: Any, *args: str) -> list[tuple[str, str]]:
    """`ptc elastic acquire --into`; [(node of the pool, its name in the lendee)]."""
    proc = ptc("elastic", "acquire", expdir.name, *args, "--into", lendee.name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = []
    for line in proc.stdout.splitlines():
        words = line.split()
        # "NAME: node-3 lent to OTHER as lent-node-3"
        if len(words) == 7 and words[2:4] == ["lent", "to"] and words[4] == lendee.name:
            found.append((words[1], words[6]))
    assert found, proc.stdout
    return found


@FAULTS_AND_LENDING
def test_a_pool_node_is_lent_to_a_second_experiment_and_slurm_grows_into_it_again(
    leaves_pool_idle: Path, lendee: Path, ptc: Any
) -> None:
    expdir = leaves_pool_idle
    jobs = start_one_by_one(expdir, [until_mark("L", then="sleep 2")] * 4)
    wait_for_pv_covering(expdir, NODES)
    [(node, name)] = lend(expdir, lendee, ptc, "--count", "1", "--grace", "20")
    # the preemption-vector protocol: the job on the node was requeued at the grace deadline
    started = events(expdir, "reclamation-started")[-1]
    rec_id = started["data"]["reclamation"]
    assert started["data"]["chosen"] == [node]
    with manager(expdir) as m:
        rec = m.reclamation(rec_id)
    victim = next(j for j, n in jobs if n == node)
    requeue = [e for e in events(expdir, "jobs-requeued") if e["data"]["reclamation"] == rec_id]
    assert [j["job_id"] for e in requeue for j in e["data"]["jobs"]] == [victim]
    assert requeue[0]["time"] >= rec["deadline"] - 2 - 1, "requeued before the grace deadline"
    finished = next(
        e for e in events(expdir, "reclamation-finished") if e["data"]["reclamation"] == rec_id
    )
    assert finished["data"]["wasted_cycles"] > 0
    # the machine left the pool's experiment and is a node of the other one
    assert node not in node_names(expdir) and name in node_names(lendee)
    assert loans(expdir)[node]["other"] == lendee.name and loans(expdir)[node]["state"] == "lent"
    assert owners(expdir)[node] == "ref"
    # the other user runs on it: from its head, over its LAN, by name; and from the host
    out = ssh(
        lendee,
        "head",
        f"ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new {name} hostname",
    ).stdout
    assert out.strip() == name, out
    proc = ptc("run", lendee.name, name, "--", "hostname")
    assert proc.returncode == 0 and name in proc.stdout, proc.stdout + proc.stderr
    # drift: the manager frees the lent node behind the loans' back, so Slurm could resume a
    # machine that is elsewhere; the repair loop hands it back to ref within its rounds
    with manager(expdir, "ref") as m:
        assert m.delete_nodes("ref", [node]) == [node]
    drift = json.loads(ptc("elastic", "reconcile", expdir.name, "--json").stdout)["found"]
    assert [(d["node"], d["kind"]) for d in drift] == [(node, "lent-but-free")]
    assert wait_for(
        f"the repair loop to hand {node} back to ref",
        lambda: owners(expdir)[node] == "ref",
        REPAIR_INTERVAL * 4 + 30,
    )
    handed = [e for e in events(expdir, "node-repaired") if e["data"]["node"] == node]
    assert handed and handed[-1]["data"]["cause"] == "its machine is lent to another experiment"
    assert ptc("elastic", "reconcile", expdir.name).returncode == 0
    # given back: out of the other experiment, back in the pool's, deployed, free
    proc = ptc("elastic", "release", expdir.name, node)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert name not in node_names(lendee) and node in node_names(expdir)
    assert loans(expdir) == {} and owners(expdir)[node] is None
    assert ptc("elastic", "reconcile", expdir.name).returncode == 0
    # no job is lost: the three finish, the requeued one runs; then Slurm grows into all four
    mark(expdir, "L")
    for job_id, _ in jobs:
        assert wait_for(
            f"job {job_id} to complete",
            lambda j=job_id: sacct(expdir, j).get("state") == "COMPLETED",
            240,
        )
    wide = sbatch(expdir, "-N4", "srun hostname")
    done = wait_for(
        "a job on all four pool nodes to complete",
        lambda: (a := sacct(expdir, wide)).get("state") == "COMPLETED" and a,
        300,
    )
    assert done["nnodes"] == "4" and node in expand(expdir, done["nodes"])


# -- per-job provisioning (Multiverse): a node goes back as soon as its job ends --------------
PER_JOB_VARS = [*EXTRAVARS, "elastic_per_job=true"]


@FAULTS_AND_LENDING
def test_per_job_each_job_gets_a_node_provisioned_for_it_and_gives_it_back_at_its_end(
    leaves_pool_idle: Path, ptc: Any, tmp_path: Path
) -> None:
    """Instant per-job provisioning: with the power operation, a job's node is started for it
    and powered down as soon as the job ends (its epilog asks Slurm, no SuspendTime wait), so a
    second job on the same node waits for a provisioning of its own. Only the head (slurm.conf,
    the client) and node-0 (its epilog) are deployed; the jobs run on node-0."""
    expdir = leaves_pool_idle
    deploy(ptc, "head,node-0", PER_JOB_VARS)
    try:
        _per_job_runs_on_node_0(expdir, ptc, tmp_path)
    finally:
        # Epilog names a glob the other pool nodes' kept disks do not have yet: off again
        deploy(ptc, "head", EXTRAVARS)


def deploy(ptc: Any, limit: str, extravars: list[str]) -> None:
    args = ["deploy", NAME, "--limit", limit]
    for extra in extravars:
        args += ["-e", extra]
    proc = ptc(*args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _per_job_runs_on_node_0(expdir: Path, ptc: Any, tmp_path: Path) -> None:
    assert "/etc/slurm/epilog.d/*" in ssh(expdir, "head", "scontrol show config").stdout
    wait_for("the pool at rest", lambda: all_back_in_pool(expdir), 240, 5)
    since = time.time()
    ran = []
    for _ in range(2):
        job_id = sbatch(expdir, "-N1 -w node-0", "cat /proc/sys/kernel/random/boot_id")
        done = wait_for(
            f"job {job_id} to complete",
            lambda j=job_id: (a := sacct(expdir, j)).get("state") == "COMPLETED" and a,
            300,
        )
        ran.append(job_id)
        # given back at once, not after SuspendTime: powered off, with the epilog's reason
        given_back = wait_for(
            f"node-0 powered down after job {job_id}",
            lambda: slurm_nodes(expdir)["node-0"][0] == "idle~" and slurm_nodes(expdir)["node-0"],
            SUSPEND_TIME + 60,
            2,
        )
        assert given_back[1] == f"ptc: per-job, job {job_id} ended", given_back
        assert done["exit"] == "0:0", done
    # each job waited for a provisioning of its own: a taxonomy row each, on node-0
    out = tmp_path / "overhead"
    shown = ptc("elastic", "overhead", NAME, "--out", str(out), "--since", str(since - 1))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    frame = pd.read_parquet(out / "overhead.parquet")
    rows = frame[frame["job_id"].astype(str).isin(ran)]
    assert sorted(rows["job_id"].astype(str)) == sorted(ran), frame
    assert set(rows["node"]) == {"node-0"} and (rows["testbed_s"] > 0).all(), rows


# -- release: the pool's idle machines go back to the testbed, for anyone ---------------------
# The partition switches to node_operation release (the head's part of a deploy is enough: the
# client and slurm.conf live there). A fresh disk is configured whole at resume, so Slurm waits
# longer for it.
RELEASE_VARS = [
    *EXTRAVARS,
    "elastic_node_operation=release",
    "slurm_power_save_resume_timeout=600",
    # full per-job provisioning: a fresh disk configured whole for each job, parked at its end
    "elastic_per_job=true",
]


def node_states(name: str) -> dict[str, str]:
    return nodeops.states(experiments.load(name))


@FAULTS_AND_LENDING
def test_under_release_idle_machines_leave_for_other_users_and_come_back_fresh(
    leaves_pool_idle: Path, lendee: Path, ptc: Any
) -> None:
    """The Part-Time Cloud's own setting: at rest the partition parks its free pool (the
    machines leave the experiment, free on the testbed), another user takes every free machine,
    and a job's resume then finds no capacity on its node's site: the node goes back to the
    pool powered down with the testbed's reason (never DOWN), the job is requeued, and the
    site's nodes are held back in a reservation while the site is paused. Once that user gives
    the machines back and the pause is over, the next resume probes the site: the job's node is
    allocated again on a fresh disk, configured whole from the head, and runs it; nobody
    resumes anything by hand, and the site is whole again."""
    expdir = leaves_pool_idle
    args = ["deploy", NAME, "--limit", "head"]
    for extra in RELEASE_VARS:
        args += ["-e", extra]
    proc = ptc(*args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wait_for(
        "the free pool parked",
        lambda: all(node_states(NAME).get(n) == "parked" for n in NODES),
        300,
        5,
    )
    gone = subprocess.run(
        ["podman", "container", "exists", f"ptc-{NAME}-node-1"], check=False, timeout=60
    )
    assert gone.returncode == 1, "a parked node's container is still there"
    assert "node-1" not in node_names(expdir)
    free = capacity.usage().free
    assert free == len(NODES), capacity.usage().describe_holders()
    # the other user takes every free machine
    extras = [f"extra-{i}" for i in range(free)]
    proc = ptc("node", "allocate", LENDEE, *extras, "--like", "node-0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert capacity.usage().free == 0
    job_id = sbatch(expdir, "-N1 -w node-1", "cat /proc/sys/kernel/random/boot_id")
    try:
        wait_for(f"job {job_id} requeued, not lost", lambda: requeued(expdir, job_id), 240)
        state, reason = wait_for(
            "node-1 powered down for want of a machine, back in the pool",
            lambda: powered_down_and_given_back(expdir, "node-1"),
            120,
        )
        assert not state.startswith("down"), state
        assert reason.startswith("ptc resume: power on: site cheap: no capacity"), reason
        assert f"0 free of {MACHINES}" in reason, reason
        # The Slurm client holds the paused site's nodes back on its next round, after the
        # failed resume has powered the node down: wait for that round.
        wait_for(
            "the paused site's nodes held back in its reservation",
            lambda: reservations(expdir) == {"ptc-paused-cheap": CHEAP},
            60,
        )
        assert node_states(NAME)["node-1"] == "parked"
    finally:
        proc = ptc("node", "release", LENDEE, *extras)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the pause over, the site is probed by the job's own resume: a fresh node-1 runs it
    done = wait_for(
        f"job {job_id} to complete on a fresh node-1",
        lambda: (a := sacct(expdir, job_id)).get("state") == "COMPLETED" and a,
        900,
        5,
    )
    assert done["nodes"] == "node-1" and done["exit"] == "0:0", done
    assert reservations(expdir) == {}
    # its job done, the machine goes back to the testbed at once (per-job), not after SuspendTime
    wait_for(
        "node-1 parked again",
        lambda: node_states(NAME).get("node-1") == "parked",
        SUSPEND_TIME + 300,
        5,
    )
    assert slurm_nodes(expdir)["node-1"][1] == f"ptc: per-job, job {job_id} ended"


def powered_down_and_given_back(expdir: Path, node: str) -> tuple[str, str] | None:
    """``(state, reason)`` once ``node`` is powered down with a reason ptc gave and is back in
    the pool."""
    state, reason = slurm_nodes(expdir)[node]
    mine = "~" in state and reason.startswith("ptc resume:")
    return (state, reason) if mine and owners(expdir)[node] is None else None


def reservations(expdir: Path) -> dict[str, list[str]]:
    """The reservations the client holds nodes back in (``ptc-...``), and their nodes."""
    out = ssh(expdir, "head", "scontrol show reservation -o", check=False).stdout
    found = {}
    for line in out.splitlines():
        fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if fields.get("ReservationName", "").startswith("ptc-"):
            found[fields["ReservationName"]] = expand(expdir, fields["Nodes"])
    return found


# -- the ledger: node-hours from sacct and the manager's log -----------------------------------
@FAULTS_AND_LENDING
def test_the_ledger_s_node_hours_per_job_and_in_all_agree_with_sacct(
    leaves_pool_idle: Path, ptc: Any, tmp_path: Path
) -> None:
    """Three short jobs (one on two nodes, an array of two one-node tasks), then `ptc elastic
    ledger --json --since` the moment before they were submitted: its node-seconds per job and
    in all are sacct's ElapsedRaw x NNodes on the head, to the second; `--out` writes the
    datasets and the plot; a wrong --by exits 2 naming it."""
    from elastic.ledger.period import iso

    expdir = leaves_pool_idle
    since = math.floor(time.time()) - 1
    two = sbatch(expdir, "-N2", "sleep 7")
    array = sbatch(expdir, "-N1 --array=0-1", "sleep 4")
    one = sbatch(expdir, "-N1", "sleep 3")
    ours = [two, f"{array}_0", f"{array}_1", one]

    def states() -> dict[str, str]:
        out = ssh(expdir, "head", f"sacct -X -n -P -j {two},{array},{one} -o JobID,State").stdout
        return dict(line.split("|", 1) for line in out.split() if "|" in line)

    wait_for(
        "the ledger's jobs to complete",
        lambda: all(states().get(j) == "COMPLETED" for j in ours),
        420,
        3,
    )
    out = tmp_path / "ledger"
    shown = ptc("elastic", "ledger", NAME, "--json", "--since", str(since), "--out", str(out))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    doc = json.loads(shown.stdout)
    # sacct itself, over the ledger's period: every run (-D), cut at the period's start
    acct = ssh(
        expdir,
        "head",
        "SLURM_TIME_FORMAT=%s sacct -a -D -X -n -P --truncate "
        f"-S {iso(since)} -E {iso(doc['until'])} -o JobID,ElapsedRaw,NNodes,NodeList",
    ).stdout
    per_job: dict[str, int] = {}
    for line in acct.splitlines():
        job_id, elapsed, nnodes, nodelist = line.split("|")
        if nodelist != "None assigned":
            per_job[job_id] = per_job.get(job_id, 0) + int(elapsed) * int(nnodes)
    rows = {row["job_id"]: row for row in doc["rows"]}
    for job_id in ours:
        assert rows[job_id]["used_node_s"] == per_job[job_id] > 0, (job_id, rows, per_job)
        assert rows[job_id]["lost_node_s"] == 0, rows[job_id]
    assert per_job[two] >= 7 * 2, per_job
    reported = sum(r["used_node_s"] for r in doc["runs"] if r["source"] != "sacct")
    assert doc["totals"]["used_node_s"] == sum(per_job.values()) + reported, (doc, per_job)
    assert doc["totals"]["instance_s"] > 0  # the jobs' nodes were held by the partition
    frame = pd.read_parquet(out / "ledger.parquet")
    assert set(ours) <= set(frame["job_id"].astype(str)), frame
    assert (out / "ledger.png").stat().st_size > 0
    wrong = ptc("elastic", "ledger", NAME, "--by", "bogus")
    assert wrong.returncode == 2 and "--by" in wrong.stderr, wrong.stderr
