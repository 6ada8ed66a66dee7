"""Campaign files: what to run, as factors and levels, validated against a JSON schema.

A campaign file (YAML) names a benchmark, the levels of each factor, the repeats and the order::

    name: fe-small
    benchmark: hpgmg-fe            # hpgmg-fe | hpgmg-fv | hpcc
    factors:
      operator: [poisson1, poisson2]
      size: [4096, 32768]          # global problem size (elements for HPGMG-FE)
      nodes: [1, 2]
      ranks_per_node: [1, 2]
      threads: [1]
    repeats: 3
    order: {randomize: true, seed: 6}
    slurm: {max_concurrent: 2, time_limit: "00:05:00"}
    # also: exclusive (whole nodes per run), singleton (one run of the campaign at a time),
    # arrays: false (one sbatch per run), user, partition, launcher

Every combination of levels is a configuration; each configuration runs ``repeats`` times.
Errors name the field (``factors.operator[2]``) and the file.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from elastic.errors import InputError, NotFoundError

BENCHMARKS = ("hpgmg-fe", "hpgmg-fv", "hpcc")
OPERATORS = ("poisson1", "poisson2", "poisson2affine")

_levels_int = {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1}
_shape = {
    "nodes": _levels_int,
    "ranks_per_node": _levels_int,
    "threads": _levels_int,
}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ptc benchmark campaign",
    "type": "object",
    "required": ["name", "benchmark", "factors"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"},
        "description": {"type": "string"},
        "benchmark": {"enum": list(BENCHMARKS)},
        "factors": {"type": "object"},
        "repeats": {"type": "integer", "minimum": 1, "default": 1},
        "order": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "randomize": {"type": "boolean"},
                "seed": {"type": "integer"},
            },
        },
        "options": {"type": "object"},
        "slurm": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "user": {"type": "string", "minLength": 1},
                "partition": {"type": "string", "minLength": 1},
                "max_concurrent": {"type": "integer", "minimum": 1},
                "time_limit": {"type": "string", "pattern": r"^(\d+-)?(\d+:)?\d+(:\d+)?$"},
                "launcher": {"type": "string", "minLength": 1},
                "arrays": {"type": "boolean"},
                "exclusive": {"type": "boolean"},
                "singleton": {"type": "boolean"},
            },
        },
    },
    "allOf": [
        {
            "if": {"properties": {"benchmark": {"const": "hpgmg-fe"}}},
            "then": {
                "properties": {
                    "factors": {
                        "type": "object",
                        "required": ["operator", "size"],
                        "additionalProperties": False,
                        "properties": {
                            "operator": {
                                "type": "array",
                                "items": {"enum": list(OPERATORS)},
                                "minItems": 1,
                            },
                            "size": _levels_int,
                            **_shape,
                        },
                    },
                    "options": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "sample_repeat": {"type": "integer", "minimum": 1},
                            "mintime": {"type": "number", "minimum": 0},
                            "smooth": {"type": "string", "pattern": r"^\d+,\d+$"},
                        },
                    },
                }
            },
        },
        {
            "if": {"properties": {"benchmark": {"const": "hpgmg-fv"}}},
            "then": {
                "properties": {
                    "factors": {
                        "type": "object",
                        "required": ["log2_box_dim", "boxes_per_rank"],
                        "additionalProperties": False,
                        "properties": {
                            "log2_box_dim": {
                                "type": "array",
                                "items": {"type": "integer", "minimum": 4, "maximum": 9},
                                "minItems": 1,
                            },
                            "boxes_per_rank": _levels_int,
                            **_shape,
                        },
                    },
                    "options": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"min_time": {"type": "number", "minimum": 0}},
                    },
                }
            },
        },
        {
            "if": {"properties": {"benchmark": {"const": "hpcc"}}},
            "then": {
                "properties": {
                    "factors": {
                        "type": "object",
                        "required": ["n"],
                        "additionalProperties": False,
                        "properties": {"n": _levels_int, "nb": _levels_int, **_shape},
                    },
                    "options": {"type": "object", "additionalProperties": False},
                }
            },
        },
    ],
}

SHAPE_DEFAULTS = {"nodes": 1, "ranks_per_node": 1, "threads": 1}


@dataclass(frozen=True)
class Run:
    """One run of one configuration: ``config`` holds every controlled variable."""

    campaign: str
    benchmark: str
    config: Mapping[str, Any]
    repeat: int
    order: int = 0

    @property
    def nodes(self) -> int:
        return int(self.config["nodes"])

    @property
    def ranks_per_node(self) -> int:
        return int(self.config["ranks_per_node"])

    @property
    def threads(self) -> int:
        return int(self.config["threads"])

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def cores(self) -> int:
        return self.ranks * self.threads

    @property
    def shape(self) -> tuple[int, int, int]:
        """What Slurm allocates: runs of one shape can share a job array."""
        return (self.nodes, self.ranks_per_node, self.threads)

    @property
    def config_id(self) -> str:
        """Stable id of the configuration (same levels -> same id, across campaigns)."""
        text = json.dumps({"benchmark": self.benchmark, **self.config}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def run_id(self) -> str:
        """Stable id of this repeat of this configuration in this campaign: what a rerun skips."""
        return f"{self.campaign}-{self.config_id}-r{self.repeat}"


@dataclass(frozen=True)
class Campaign:
    name: str
    benchmark: str
    factors: Mapping[str, tuple[Any, ...]]
    repeats: int = 1
    randomize: bool = True
    seed: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)
    user: str = "ptc"
    partition: str | None = None
    max_concurrent: int = 2
    time_limit: str = "00:10:00"
    launcher: str = "srun --mpi=pmix"
    arrays: bool = True
    # Whole nodes per run (sbatch --exclusive), and one run of the campaign at a time across
    # all its arrays (--dependency=singleton): measurements that do not share cores.
    exclusive: bool = False
    singleton: bool = False
    source: str = "<campaign>"

    def configurations(self) -> list[dict[str, Any]]:
        """Every combination of levels, with the shape factors' defaults filled in."""
        names = list(self.factors)
        configs = []
        for values in itertools.product(*(self.factors[n] for n in names)):
            config = dict(SHAPE_DEFAULTS)
            config.update(zip(names, values, strict=True))
            configs.append(config)
        return configs

    def runs(self) -> list[Run]:
        """All runs, in the campaign's order (shuffled with ``seed`` when ``randomize``)."""
        runs = [
            Run(self.name, self.benchmark, config, rep)
            for config in self.configurations()
            for rep in range(self.repeats)
        ]
        if self.randomize:
            random.Random(self.seed).shuffle(runs)
        return [
            Run(r.campaign, r.benchmark, r.config, r.repeat, index) for index, r in enumerate(runs)
        ]

    def space(self) -> list[dict[str, Any]]:
        """The configurations, for active learning: the candidates it may pick (again)."""
        return self.configurations()


def _where(error: jsonschema.ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse(data: object, source: str = "<campaign>") -> Campaign:
    """Validate a loaded campaign document and build the :class:`Campaign`."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), e.message))
    if errors:
        # The deepest error is the most specific one (an if/then failure reports at both levels).
        err = max(errors, key=lambda e: len(e.absolute_path))
        raise InputError(f"{source}: {_where(err)}: {err.message}")
    assert isinstance(data, dict)
    factors = {str(k): tuple(v) for k, v in data["factors"].items()}
    for name, levels in factors.items():
        if len(set(levels)) != len(levels):
            raise InputError(f"{source}: factors.{name}: a level is listed twice")
    order = data.get("order", {})
    slurm = data.get("slurm", {})
    return Campaign(
        name=data["name"],
        benchmark=data["benchmark"],
        factors=factors,
        repeats=int(data.get("repeats", 1)),
        randomize=bool(order.get("randomize", True)),
        seed=int(order.get("seed", 0)),
        options=dict(data.get("options", {})),
        user=slurm.get("user", "ptc"),
        partition=slurm.get("partition"),
        max_concurrent=int(slurm.get("max_concurrent", 2)),
        time_limit=slurm.get("time_limit", "00:10:00"),
        launcher=slurm.get("launcher", "srun --mpi=pmix"),
        arrays=bool(slurm.get("arrays", True)),
        exclusive=bool(slurm.get("exclusive", False)),
        singleton=bool(slurm.get("singleton", False)),
        source=source,
    )


def load(path: Path) -> Campaign:
    if not path.is_file():
        raise NotFoundError(f"campaign file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}{line}: not valid YAML: {err}") from err
    return parse(data, str(path))


def schema_text() -> str:
    return json.dumps(SCHEMA, indent=2) + "\n"


def hpcc_campaign(
    nodes: tuple[int, ...] = (2,),
    tasks_per_node: tuple[int, ...] = (1,),
    sizes: tuple[int, ...] = (2000,),
    block: int = 80,
    repeats: int = 1,
    user: str = "ptc",
    launcher: str = "srun --mpi=pmix",
    name: str = "hpcc",
) -> Campaign:
    """The campaign ``ptc bench hpcc`` runs: HPCC on the same engine as every campaign."""
    return parse(
        {
            "name": name,
            "benchmark": "hpcc",
            "factors": {
                "n": list(sizes),
                "nb": [block],
                "nodes": list(nodes),
                "ranks_per_node": list(tasks_per_node),
            },
            "repeats": repeats,
            "order": {"randomize": False},
            "slurm": {"user": user, "launcher": launcher},
        },
        "ptc bench hpcc",
    )
