"""The committed HPGMG-FE dataset: complete, described, reproducible from its campaign file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from elastic.bench import dataset, spec
from elastic.learn import evaluate, rules

DATA = Path(__file__).resolve().parents[3] / "datasets"
STEM = DATA / "hpgmg-fe-local"


def test_dataset_is_the_campaign_it_says() -> None:
    frame = dataset.load(STEM.with_suffix(".parquet"))
    plan = spec.load(STEM.with_suffix(".yml"))
    assert len(frame) >= 300
    # Every run of the campaign has a good row: the dataset is the campaign, done.
    good = frame[(frame["state"] == "COMPLETED") & (frame["error"].fillna("") == "")]
    assert {r.run_id for r in plan.runs()} <= set(good["run_id"])
    assert (good["runtime_s"] > 0).all() and (good["dof_per_s"] > 0).all()
    csv = pd.read_csv(STEM.with_suffix(".csv"))
    assert len(csv) == len(frame) and list(csv.columns) == list(frame.columns)
    columns = json.loads(STEM.with_suffix(".columns.json").read_text())
    assert set(frame.columns) <= set(columns)
    assert all(columns[c]["meaning"] for c in frame.columns)


def test_replay_on_the_dataset_is_seeded() -> None:
    frame = dataset.load(STEM.with_suffix(".parquet"))
    settings = evaluate.Settings(repeats=1, steps=8, seed=3, restarts=0)
    chosen = rules.parse_list("VR,CE,Random")
    one = evaluate.evaluate(frame, chosen, settings)
    two = evaluate.evaluate(frame, chosen, settings)
    pd.testing.assert_frame_equal(one.trajectories, two.trajectories)
    assert np.isfinite(one.trajectories["rmse"]).all()
    # CE's picks are cheaper than VR's on this data: its penalty on the predicted cost works.
    spent = one.trajectories.groupby("rule")["cost"].max()
    assert spent["CE(C=1)"] < spent["VR"]
