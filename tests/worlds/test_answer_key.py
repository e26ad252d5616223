"""The answer key is what the data room supports: values no system recorded are left out of phenomenon truth."""

from __future__ import annotations

import json

import pandas as pd

from worldsmith.evolution.worlds import build_world, load_template


def _truth(world, pid):
    return next(p["value"] for p in json.loads((world / ".truth/phenomena.json").read_text())["phenomena"]
                if p["id"] == pid)


def test_blanked_readings_are_left_out_of_the_answer_key(tmp_path):
    """environment_geospatial: 10% of pm25 readings go blank, more often in high wind (which lowers pm25). The
    urban-minus-rural gap in the key is the gap over the readings that exist, recomputed here with plain pandas."""
    w = tmp_path / "w"
    build_world(load_template("environment_geospatial", rows=3000), 2, w, audit=False)
    sensors = pd.read_parquet(w / "data/sensors.parquet")
    stations = pd.read_csv(w / "data/stations.csv")
    assert sensors["pm25"].isna().mean() > 0.05  # the defect is there
    def key(ids: pd.Series) -> pd.Series:
        return ids.astype(str).str.replace(r"[^0-9]", "", regex=True).astype(int)

    sensors = sensors.assign(k=key(sensors["station_id"])).drop_duplicates(["k", "period"], keep="first")
    stations = stations.assign(k=key(stations["station_id"]), land_use=stations["land_use"].str.lower())
    df = sensors.merge(stations[["k", "land_use"]], on="k", how="left").dropna(subset=["pm25"])
    means = df.groupby("land_use")["pm25"].mean()
    # readings are rounded to 0.1 in the file; the key keeps full precision
    assert abs(_truth(w, "urban_rural_pm") - (means["urban"] - means["rural"])) < 0.02
    canon = pd.read_parquet(w / ".truth/canonical/station_weeks.parquet").merge(
        pd.read_parquet(w / ".truth/canonical/stations.parquet"), on="station_id")
    full = canon.groupby("land_use")["pm25"].mean()
    assert abs((full["urban"] - full["rural"]) - (means["urban"] - means["rural"])) > 0.02  # the key did move
