"""Delta tables that Spark, Databricks and delta-rs wrote (the shared corpus) through the Python API:
dates, timestamps and decimals as numpy and pandas values, structs, arrays and maps as dicts and
lists, rows that deletion vectors delete left out, and column mapping's physical names hidden.

The corpus is <repo>/../shared/corpus/delta-rs (a fresh clone has none: the module skips, saying so).
"""

import decimal

import numpy as np
import pytest

from stoke_env import REPO, import_stoke

stoke = import_stoke()

CORPUS = REPO.parent / "shared" / "corpus" / "delta-rs"
if not CORPUS.is_dir():
    pytest.skip(f"no Delta corpus at {CORPUS} (it comes with the project's shared folder)", allow_module_level=True)


def table(name):
    return stoke.open_table(str(CORPUS / name))


def test_dates_are_datetime64_days():
    q = table("delta-0.8.0-date").query()
    assert q["date"].dtype == np.dtype("datetime64[D]")
    assert q["date"][0] == np.datetime64("2021-01-01")
    df = table("delta-0.8.0-date").query(to="pandas")
    import pandas as pd
    assert df["date"].iloc[0] == pd.Timestamp("2021-01-01")


def test_timestamps_are_datetime64_micros_to_the_calendars_end():
    q = table("table_with_edge_timestamps").query()
    assert q["BIG_DATE"].dtype == np.dtype("datetime64[us]")
    assert np.datetime64("9999-12-31T00:00:00") in q["BIG_DATE"]
    assert np.datetime64("2022-01-01T00:00:00") in q["NORMAL_DATE"]


def test_decimals_are_exact_and_nested_columns_are_dicts_and_lists():
    q = table("delta-1.2.1-only-struct-stats").query()
    assert isinstance(q["decimal"][0], decimal.Decimal)
    assert q["decimal"][0] == decimal.Decimal("-5.67800")
    assert q["struct"][0] == {"struct_element": "struct_value"}
    assert q["map"][0] == {"map_key": "map_value"}
    assert q["array"][0] == ["array_value"]
    assert q["struct_of_array_of_map"][0] == {"struct_element": [{"map_key": "map_value"}]}


def test_decimals_as_float64_on_request():
    t = table("delta-1.2.1-only-struct-stats")
    exact = t.query()["decimal"]
    q = t.query(decimals="float64")
    assert q["decimal"].dtype == np.float64
    assert q["decimal"][0] == -5.678
    nulls = [v is None for v in exact]
    assert np.isnan(q["decimal"]).tolist() == nulls
    assert ("decimal.valid" in q) == any(nulls)
    assert q["struct"][0] == {"struct_element": "struct_value"}  # other columns as before
    assert t.query(decimals="float64", to="pandas")["decimal"].iloc[0] == -5.678
    with pytest.raises(ValueError, match="decimals"):
        t.query(decimals="double")


def test_rows_a_deletion_vector_deletes_are_left_out():
    t = table("table-with-dv-small")
    assert t.count() == 8
    assert sorted(t.query()["value"].tolist()) == list(range(1, 9))  # 0 and 9 are deleted


def test_column_mapping_reads_under_the_schemas_names():
    q = table("table_with_column_mapping").query()
    assert "Company Very Short" in q
    assert all(not name.startswith("col-") for name in q)


def test_the_loader_delivers_decimals_as_float64_and_refuses_nested_columns_naming_them():
    path = str(CORPUS / "delta-1.2.1-only-struct-stats")
    exact = {int(i): d for i, d in zip(*[stoke.open_table(path).query()[c] for c in ("integer", "decimal")])}
    seen = 0
    for batch in stoke.Loader(path, columns=["integer", "decimal"], to="numpy", batch_size=4, shuffle="none"):
        assert batch["decimal"].dtype == np.float64
        valid = batch.get("decimal.valid", np.ones(len(batch["decimal"]), dtype=np.uint8))
        for i, d, ok in zip(batch["integer"].tolist(), batch["decimal"].tolist(), valid.tolist()):
            assert (exact[i] is None) == (not ok)
            if ok:
                assert d == pytest.approx(float(exact[i]), rel=1e-15)
            seen += 1
    assert seen == len(exact)
    with pytest.raises(Exception, match="struct"):
        stoke.Loader(str(CORPUS / "delta-1.2.1-only-struct-stats"), columns=["struct"])


def test_the_loader_delivers_spark_arrays_as_tensors_with_the_querys_values():
    """Spark's array<int|long|byte|short|boolean|float|double> columns: [batch, n] tensors, each row
    the array `query` prints; arrays of strings are refused, naming the column."""
    path = str(CORPUS / "golden" / "data-reader-array-primitives")
    numeric = ["as_array_int", "as_array_long", "as_array_byte", "as_array_short", "as_array_boolean",
               "as_array_float", "as_array_double"]
    rows = stoke.open_table(path).query(columns=numeric)
    expected = sorted(zip(*[rows[c] for c in numeric]), key=lambda r: r[0])
    decoded = {}
    for shuffle in ("global", "block"):
        got = []
        loader = stoke.Loader(path, columns=numeric, to="numpy", batch_size=3, shuffle=shuffle, seed=5)
        for batch in loader:
            assert batch["as_array_float"].dtype == np.float32 and batch["as_array_double"].dtype == np.float64
            assert batch["as_array_boolean"].dtype == np.bool_ and batch["as_array_long"].dtype == np.int64
            assert batch["as_array_int"].ndim == 2
            got += zip(*[batch[c].tolist() for c in numeric])
        got.sort(key=lambda r: r[0])
        assert [tuple(list(a) for a in r) for r in got] == [tuple(list(a) for a in r) for r in expected], shuffle
        decoded[shuffle] = loader.stats()["pages_decoded"]
    # Every page of the 7 columns once, with either order: the cache holds this small table whole.
    assert decoded["block"] == decoded["global"] >= len(numeric), decoded
    with pytest.raises(Exception, match="as_array_string"):
        stoke.Loader(path, columns=["as_array_string"])


def test_the_loader_reshapes_an_array_column_as_told():
    path = str(CORPUS / "golden" / "data-reader-array-primitives")
    batch = next(iter(stoke.Loader(path, columns=["as_array_double"], to="numpy", batch_size=2, shuffle="none",
                                   shapes={"as_array_double": (1, 1)})))
    assert batch["as_array_double"].shape == (2, 1, 1)
    with pytest.raises(ValueError, match="shapes"):
        stoke.Loader(path, columns=["as_array_double"], shapes={"as_array_double": (2,)})
