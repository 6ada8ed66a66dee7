"""Configuration-server figures, measured on real etcd clusters (Debian's etcd-server) on this
machine's loopback, set up as the etcd role sets up members (TLS, client certificates, users
and roles, JWT tokens):

- leader failover over N kills: SIGKILL the leader member, then time until a write through a
  client that knows every member is acknowledged again (median, max);
- the elastic manager's typical transaction (EtcdStore: a linearizable read of the state, then
  one compare-and-swap of the whole document) with 3 members and with 1: throughput, p50, p99;
- snapshot size and time, and restore time (etcdctl snapshot restore + a new member serving).

With ``--experiment NAME`` the same transaction and failover figures are measured on a
deployed experiment's three members instead, from this machine through ptc's SSH tunnel
(failover by SIGKILL of the leader's etcd, which systemd restarts); deploy one with
``configServerLatency=0`` and one with ``=25`` (the profile delays the last member's LAN
traffic with the local testbed's link shaping) to compare a member 25 ms away.

With ``--manager-failovers N`` (and ``--experiment NAME``, a local experiment deployed with
``-e ptc_elastic=true``), the elastic manager's failover over N kills instead: each round
freezes the node of the active manager (``podman pause``: to the network and the other members
a dead node, no answer and no reset) while ``tests/support/probe.py`` on node-0, given every
manager, asks for the status every 0.1 s; the figure is the time from the freeze to the first
request served after it, by another manager (the containers share this machine's clock;
the freeze counts from when ``podman pause`` returns, its own duration is printed). The
node is thawed and rejoins before the next round. Kills of a node that also held etcd's
leadership are reported apart: etcd first elects a leader, which extends every lease.

    .venv/bin/python benchmarks/configserver_bench.py [--kills 10] [--writes 300]
    .venv/bin/python benchmarks/configserver_bench.py --experiment NAME [--kills 10]
    .venv/bin/python benchmarks/configserver_bench.py --experiment NAME --manager-failovers 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "configserver"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # support.*

from etcd_env import EtcdServer, apply_auth, free_port, make_pki, start_cluster, start_etcd

from elastic import cluster_groups, node_paths
from elastic.configserver.client import EtcdClient
from elastic.configserver.cluster import PROBE_KEY
from elastic.configserver.errors import ConfigServerError
from elastic.manager.errors import RevisionConflict
from elastic.manager.etcd_store import DEFAULT_KEY as MANAGER_STATE_KEY
from elastic.manager.etcd_store import EtcdStore


def client_for(servers: list[EtcdServer], user: str = "root", timeout: float = 2.0) -> EtcdClient:
    return EtcdClient([s.endpoint for s in servers], servers[0].credentials(user), timeout=timeout)


def typical_state(nodes: int = 16, events: int = 200) -> dict[str, Any]:
    """About the size of the manager's document for a small pool with some history."""
    return {
        "nodes": {
            f"node-{i}": {"owner": "slurm" if i % 2 else None, "cpus": 16, "memory_mb": 65536,
                          "features": ["x86_64", "ib"], "state": "allocated"}
            for i in range(nodes)
        },
        "partitions": {p: {"endpoint": f"http://10.10.1.1:{8701 + i}", "pv": {
            f"node-{j}": round(j / nodes, 3) for j in range(nodes)}} for i, p in enumerate(["slurm", "ref"])},
        "reclamations": {},
        "events": [{"t": 1.0e9 + k, "kind": "acquire", "node": f"node-{k % nodes}"} for k in range(events)],
    }  # fmt: skip


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_transactions(servers: list[EtcdServer], writes: int) -> dict[str, float]:
    with client_for(servers, "manager") as c:
        store = EtcdStore(c, "/ptc/manager/bench")
        doc = typical_state()
        revision, _ = store.read()
        latencies = []
        started = time.perf_counter()
        for i in range(writes):
            t0 = time.perf_counter()
            revision, current = store.read()
            (current or doc)["events"][-1]["t"] = float(i)
            try:
                revision = store.write(current or doc, expect=revision)
            except RevisionConflict:
                continue
            latencies.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - started
    size = len(json.dumps(doc))
    return {
        "writes": len(latencies),
        "per_s": len(latencies) / elapsed,
        "p50_ms": 1000 * pct(latencies, 0.5),
        "p99_ms": 1000 * pct(latencies, 0.99),
        "doc_bytes": size,
    }


def leader_of(servers: list[EtcdServer]) -> int | None:
    for s in servers:
        if s.proc.poll() is not None:
            continue
        try:
            with client_for([s], timeout=1.0) as c:
                st = c.status(s.endpoint)
        except ConfigServerError:
            continue
        if st.leader:
            for j, other in enumerate(servers):
                try:
                    with client_for([other], timeout=1.0) as c2:
                        if c2.status(other.endpoint).member_id == st.leader:
                            return j
                except ConfigServerError:
                    continue
    return None


def wait_healthy(servers: list[EtcdServer], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with client_for(servers, timeout=1.0) as c:
                if all(c.status(s.endpoint).leader for s in servers):
                    c.get(PROBE_KEY)
                    return
        except ConfigServerError:
            pass
        time.sleep(0.1)
    raise SystemExit("the cluster did not become healthy")


def bench_failover(servers: list[EtcdServer], kills: int) -> list[float]:
    times = []
    for k in range(kills):
        wait_healthy(servers)
        index = leader_of(servers)
        assert index is not None, "no leader"
        victim = servers[index]
        with client_for(servers, timeout=0.5) as c:
            victim.kill()
            t0 = time.perf_counter()
            while True:
                try:
                    c.put("/ptc/bench/failover", str(k))
                    break
                except ConfigServerError:
                    time.sleep(0.01)
            times.append(time.perf_counter() - t0)
        victim.restart()
    wait_healthy(servers)
    return times


def bench_snapshot(servers: list[EtcdServer], work: Path) -> dict[str, float]:
    with client_for(servers) as c:
        store = EtcdStore(c, MANAGER_STATE_KEY)
        store.write(typical_state(), expect=store.read()[0])
        for i in range(50):
            c.put(f"/ptc/partitions/slurm/key-{i}", "x" * 200)
        c.put("/ptc/secrets/munge.key", os.urandom(1024).hex())
        path = work / "snap.db"
        t0 = time.perf_counter()
        with path.open("wb") as out:
            snap = c.snapshot(out)
        taken = time.perf_counter() - t0
        keys = c.range("/", prefix=True, keys_only=True).count
    data = work / "restored"
    port, peer = free_port(), free_port()
    t0 = time.perf_counter()
    subprocess.run(
        ["etcdctl", "snapshot", "restore", str(path), f"--data-dir={data}", "--name=r",
         f"--initial-cluster=r=https://127.0.0.1:{peer}", "--initial-cluster-token=bench",
         f"--initial-advertise-peer-urls=https://127.0.0.1:{peer}"],
        check=True, capture_output=True, env={**os.environ, "ETCDCTL_API": "3"},
    )  # fmt: skip
    restored = start_etcd(servers[0].pki, data, work / "r.log", name="r", ports=(port, peer))
    try:
        with EtcdClient([restored.endpoint], servers[0].credentials("root")) as c:
            while True:
                try:
                    count = c.range("/", prefix=True, keys_only=True).count
                    break
                except ConfigServerError:
                    time.sleep(0.05)
        restore_s = time.perf_counter() - t0
    finally:
        restored.stop()
    assert count == keys, f"restored {count} keys of {keys}"
    return {"bytes": snap.size, "keys": keys, "snapshot_s": taken, "restore_s": restore_s}


def experiment_figures(name: str, writes: int, kills: int, client_timeout: float = 2.0) -> None:
    from elastic.configserver.access import members_of, open_experiment
    from elastic.configserver.cluster import cluster_status
    from elastic.testbed import experiment as experiments

    exp = experiments.load(name)
    params = exp.params
    with open_experiment(name, "root", timeout=client_timeout) as c:
        store = EtcdStore(c, "/ptc/manager/bench")
        doc = typical_state()
        latencies = []
        started = time.perf_counter()
        for i in range(writes):
            t0 = time.perf_counter()
            revision, current = store.read()
            (current or doc)["events"][-1]["t"] = float(i)
            store.write(current or doc, expect=revision)
            latencies.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - started
        print(
            f"{name} ({len(members_of(exp))} members, configServerLatency="
            f"{params.get('configServerLatency', '0')} ms): manager transaction "
            f"{len(latencies) / elapsed:.0f}/s, p50 {1000 * pct(latencies, 0.5):.1f} ms, "
            f"p99 {1000 * pct(latencies, 0.99):.1f} ms over {len(latencies)} writes (via SSH tunnel)"
        )
        times = []
        for k in range(kills):
            deadline = time.monotonic() + 60
            while not cluster_status(c).healthy and time.monotonic() < deadline:
                time.sleep(0.2)
            victim = cluster_status(c).leader
            assert victim, "no leader"
            subprocess.run(
                ["ssh", "-F", str(exp.ssh_config_path), victim, "systemctl kill -s KILL etcd"],
                check=True, capture_output=True, timeout=30,
            )  # fmt: skip
            t0 = time.perf_counter()
            while True:
                try:
                    c.put("/ptc/bench/failover", str(k))
                    break
                except ConfigServerError:
                    time.sleep(0.01)
            times.append(time.perf_counter() - t0)
        print(
            f"{name}: leader failover over {len(times)} kills (client timeout "
            f"{client_timeout:g} s): median {statistics.median(times):.2f} s, "
            f"max {max(times):.2f} s"
        )


PROBE = f"{node_paths.REPOSITORY}/tests/support/probe.py"


def manager_failovers(name: str, kills: int, probe_node: str = "node-0") -> None:
    from support.probe import failover

    from elastic.configserver.access import open_experiment
    from elastic.configserver.cluster import cluster_status
    from elastic.manager.workstation import find_manager, inventory_groups, ssh_run
    from elastic.testbed import experiment as experiments
    from elastic.testbed.backends.local.backend import container_name

    exp = experiments.load(name)
    inventory, ssh_config = exp.inventory_path, exp.ssh_config_path
    members = inventory_groups(inventory).get(cluster_groups.CONFIG_SERVER) or []
    site = find_manager(inventory, ssh_config)
    urls = site.urls
    token = ssh_run(ssh_config, site.node, f"cat {site.token_path(None)}").strip()
    lan = {m: ssh_run(ssh_config, m, "hostname -I").split() for m in members}
    node_of = {u: m for u in urls for m in members if u.split("//")[1].split(":")[0] in lan[m]}

    def health() -> dict[str, Any]:
        out = ssh_run(ssh_config, probe_node, f"python3 {PROBE} --health --urls {','.join(urls)}")
        got: dict[str, Any] = json.loads(out)
        return got

    def settled() -> str | None:
        """The active manager's URL once every manager answers and exactly one is active."""
        h = health()
        actives = [u for u, v in h.items() if v.get("active")]
        if len(actives) == 1 and all("error" not in v for v in h.values()):
            return actives[0]
        return None

    times: list[float] = []
    pauses: list[float] = []  # how long `podman pause` took
    from_start: list[float] = []  # the same failovers counted from when pausing began
    with_leader: list[float] = []  # the frozen node held etcd's leadership as well
    without: list[float] = []
    for k in range(kills):
        deadline = time.monotonic() + 120
        active = settled()
        while active is None and time.monotonic() < deadline:
            time.sleep(1)
            active = settled()
        assert active, "no settled set of managers"
        victim = node_of[active]
        with open_experiment(name, "root", timeout=2.0) as c:
            etcd_leader = cluster_status(c).leader
        probe = subprocess.Popen(
            ["ssh", "-F", str(ssh_config), "-o", "BatchMode=yes", probe_node,
             f"python3 {PROBE} --urls {','.join(urls)} --duration 25"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert probe.stdin is not None
        probe.stdin.write(token + "\n")
        probe.stdin.close()
        probe.stdin = None  # communicate() below only reads
        time.sleep(3)
        container = container_name(name, victim)
        pausing = time.time()
        subprocess.run(["podman", "pause", container], check=True, capture_output=True)
        killed_at = time.time()  # frozen for sure from here; pausing takes a while under load
        pauses.append(killed_at - pausing)
        try:
            out = probe.communicate(timeout=120)[0]
        finally:
            subprocess.run(["podman", "unpause", container], check=True, capture_output=True)
        samples = json.loads(out)["samples"]
        took = failover(samples, killed_at, active)
        assert took is not None, f"round {k + 1}: no request served after {victim} froze"
        times.append(took)
        upper = failover(samples, pausing, active)  # counted from when pausing began
        assert upper is not None
        from_start.append(upper)
        both = victim == etcd_leader
        (with_leader if both else without).append(took)
        also = " (and etcd's leader)" if both else ""
        print(
            f"  round {k + 1}: {victim}{also} frozen (pause took {pauses[-1]:.2f} s), served "
            f"again after {took:.2f} s ({upper:.2f} s from when pausing began)",
            flush=True,
        )
    print(
        f"{name}: elastic manager failover over {len(times)} kills (active manager's node frozen "
        f"to the next request served): median {statistics.median(times):.2f} s, "
        f"max {max(times):.2f} s (counted from when pausing began: median "
        f"{statistics.median(from_start):.2f} s, max {max(from_start):.2f} s)"
    )
    for label, part in (("held etcd's leader too", with_leader), ("did not", without)):
        if part:
            print(
                f"  {len(part)} kills where the node {label}: median "
                f"{statistics.median(part):.2f} s, max {max(part):.2f} s"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--experiment", help="measure a deployed experiment's members instead")
    parser.add_argument(
        "--manager-failovers", type=int, default=0, help="with --experiment: N manager kills"
    )
    parser.add_argument(
        "--client-timeout",
        type=float,
        default=2.0,
        help="with --experiment: the etcd client's per-request timeout (the manager's is 2 s; "
        "a write in flight when the leader dies waits it out, so shorter shows etcd's own time)",
    )
    args = parser.parse_args()
    if args.experiment and args.manager_failovers:
        manager_failovers(args.experiment, args.manager_failovers)
        return
    if args.experiment:
        experiment_figures(args.experiment, args.writes, args.kills, args.client_timeout)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pki = make_pki(work / "pki")
        for members in (3, 1):
            servers = start_cluster(pki, work / f"c{members}", members)
            try:
                wait_healthy(servers)
                apply_auth(servers[0])
                tx = bench_transactions(servers, args.writes)
                print(
                    f"{members} member(s): manager transaction ({tx['doc_bytes']} B document, "
                    f"read + CAS): {tx['per_s']:.0f}/s, p50 {tx['p50_ms']:.1f} ms, "
                    f"p99 {tx['p99_ms']:.1f} ms over {tx['writes']} writes"
                )
                if members == 3:
                    times = bench_failover(servers, args.kills)
                    print(
                        f"3 members: leader failover over {len(times)} kills (SIGKILL of the "
                        f"leader to the next acknowledged write): median "
                        f"{statistics.median(times):.2f} s, max {max(times):.2f} s"
                    )
                    snap = bench_snapshot(servers, work)
                    print(
                        f"snapshot of the demo state ({snap['keys']} keys): {snap['bytes']} bytes "
                        f"in {snap['snapshot_s']:.3f} s; restore (etcdctl + a member serving) "
                        f"{snap['restore_s']:.2f} s"
                    )
            finally:
                for s in servers:
                    s.stop()
    print("25 ms member: see --experiment on experiments with configServerLatency=0 and 25")


if __name__ == "__main__":
    main()
