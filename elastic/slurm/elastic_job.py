"""``ptc-elastic``: the command a running job resizes itself with from its batch script, or
its owner with ``--job`` from any Slurm node (E-HPC's expand, contract and done, and its
plan-driven elasticity). It prints the job's nodes afterwards, one per line; ``plan`` prints one
JSON line per stage. Standard library and PyYAML only: it runs on a compute node's python3."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from elastic import atomic
from elastic.errors import PtcError
from elastic.slurm.commands import Runner, subprocess_runner
from elastic.slurm.plan import load_plan, run_plan
from elastic.slurm.resize import Resizer, environment_script, hostfile, notify

# A resume of powered-down pool nodes happens inside salloc, and a plan's stages run inside
# the command: this bounds one Slurm command, not the whole run.
COMMAND_TIMEOUT_S = 24 * 3600


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ptc-elastic", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["expand", "contract", "done", "plan"])
    parser.add_argument("--to", type=int, help="expand: the job's size afterwards, in nodes")
    parser.add_argument("--by", type=int, help="contract: how many nodes to give back")
    parser.add_argument("--plan", type=Path, help="plan: the elasticity plan (YAML)")
    parser.add_argument("--job", default=os.environ.get("SLURM_JOB_ID", ""),
                        help="the job (default: $SLURM_JOB_ID, the job calling)")  # fmt: skip
    parser.add_argument("--hostfile", type=Path, help="write the job's nodes here, one per line")
    parser.add_argument("--env", type=Path,
                        help="write the job's SLURM_* settings here, for the job to source")  # fmt: skip
    parser.add_argument("--notify", action="store_true", help="then SIGUSR1 the batch script")
    parser.add_argument("--wait", type=int, default=60,
                        help="expand: seconds to wait for the partition to have the nodes free")  # fmt: skip
    args = parser.parse_args(argv)
    if not args.job:
        parser.error("--job: no job given and SLURM_JOB_ID is not set")
    if args.action == "expand" and args.to is None:
        parser.error("expand: --to N is missing")
    if args.action == "contract" and args.by is None:
        parser.error("contract: --by K is missing")
    if args.action == "plan" and args.plan is None:
        parser.error("plan: --plan FILE is missing")
    # checked before the job changes: a resize whose host list cannot be written is half done
    for option, path in (("--hostfile", args.hostfile), ("--env", args.env)):
        if path is not None and not os.access(path.parent, os.W_OK):
            parser.error(f"{option}: cannot write in {path.parent} (missing or not writable)")
    # Slurm drops resize scripts in the working directory of a NumNodes update (the helper
    # allocation's too): the resize commands run in a scratch directory, a plan's steps in the
    # job's own.
    with tempfile.TemporaryDirectory(prefix="ptc-elastic-") as scratch:
        resizer = Resizer(
            subprocess_runner(timeout=COMMAND_TIMEOUT_S, cwd=scratch), wait_for_nodes_s=args.wait
        )
        try:
            return _act(args, resizer, subprocess_runner(timeout=COMMAND_TIMEOUT_S))
        except PtcError as err:
            print(f"ptc-elastic {args.action}: {err}", file=sys.stderr)
            return err.exit_code


def _act(args: argparse.Namespace, resizer: Resizer, run: Runner) -> int:
    if args.action == "plan":
        for stage in run_plan(resizer, run, args.job, load_plan(args.plan)):
            print(json.dumps(stage.as_json(), sort_keys=True), flush=True)
        return 0
    if args.action == "expand":
        shape = resizer.expand(args.job, args.to)
    elif args.action == "contract":
        shape = resizer.contract(args.job, args.by)
    else:
        shape = resizer.done(args.job)
    for option, path, text in (
        ("--hostfile", args.hostfile, hostfile(shape.nodes)),
        ("--env", args.env, environment_script(shape)),
    ):
        if path is None:
            continue
        try:
            atomic.write_text(path, text)
        except OSError as err:
            raise PtcError(
                f"{option}: {path}: {err.strerror}; job {args.job} is on "
                f"{len(shape.nodes)} node(s) now: {','.join(shape.nodes)}"
            ) from err
    if args.notify:
        notify(run, args.job)
    print(hostfile(shape.nodes), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
