"""Ragged and null array columns through the Python Loader: padded to a shape and null elements
filled when asked (pad=, fill=), errors naming the row otherwise.

The fixture is tests/data/duckdb/lists.parquet, written by DuckDB (its generate.mjs), read as a plain
Parquet dataset. Its rows:
    id  ints       nested
    1   [1, 2, 3]  [[1], [], null, [2, 3]]
    2   []         []
    3   null       null
    4   [null]     [[null]]
"""

import numpy as np
import pytest

from stoke_env import REPO, import_stoke

stoke = import_stoke()

LISTS = str(REPO / "tests" / "data" / "duckdb" / "lists.parquet")


def load(where="", **options):
    table = stoke.open_table(LISTS, where=where) if where else LISTS
    batch = next(iter(stoke.Loader(table, to="numpy", batch_size=4, shuffle="none", **options)))
    order = np.argsort(batch["id"])
    return {c: batch[c][order] for c in options["columns"]}


def test_ragged_empty_and_null_rows_are_padded_with_the_fill():
    b = load(columns=["id", "ints", "nested"], pad={"ints": 4, "nested": (4, 2)}, fill={"ints": -1, "nested": 9})
    assert b["ints"].dtype == np.int32 and b["ints"].shape == (4, 4)
    assert b["ints"].tolist() == [[1, 2, 3, -1], [-1] * 4, [-1] * 4, [-1] * 4]
    assert b["nested"].shape == (4, 4, 2)
    assert b["nested"][0].tolist() == [[1, 9], [9, 9], [9, 9], [2, 3]]
    assert (b["nested"][1:] == 9).all()


def test_padding_without_a_fill_pads_with_zero_and_a_null_element_is_an_error():
    b = load(columns=["id", "ints"], pad={"ints": [3]}, where="id < 4")
    assert b["ints"].tolist() == [[1, 2, 3], [0, 0, 0], [0, 0, 0]]
    with pytest.raises(ValueError, match=r"lists\.parquet row 3 .*a null element at \[0\].*the option fill"):
        load(columns=["id", "ints"], pad={"ints": [3]})


def test_without_padding_a_ragged_row_is_an_error_naming_the_row():
    # Rows 1, 2 and 3 are each an error: the one the workers reach first is raised.
    with pytest.raises(ValueError, match=r"lists\.parquet row [123] .*(an empty list|a null row|a ragged list)"):
        load(columns=["id", "ints"])
    with pytest.raises(ValueError, match=r"lists\.parquet row 1 .*an empty list"):
        load(columns=["id", "ints"], where="id <= 2")


def test_padding_and_fill_that_do_not_fit_the_column_are_refused_at_open():
    with pytest.raises(ValueError, match=r"pad\['nested'\]: \[4\] gives 1 lengths, but the column nests 2 lists"):
        stoke.Loader(LISTS, columns=["nested"], pad={"nested": 4})
    with pytest.raises(ValueError, match=r"fill\['ints'\]: fill value 0\.5 is not a int32 value"):
        stoke.Loader(LISTS, columns=["ints"], pad={"ints": 4}, fill={"ints": 0.5})
    with pytest.raises(ValueError, match="pad: 'id' is not an array column"):
        stoke.Loader(LISTS, columns=["id", "ints"], pad={"id": 1})


def test_a_pad_that_is_not_a_shape_is_refused_by_name():
    for bad in (True, 512.0, "4"):
        with pytest.raises(TypeError, match=r"pad\['ints'\]"):
            stoke.Loader(LISTS, columns=["ints"], pad={"ints": bad})
    with pytest.raises(ValueError, match=r"pad\['ints'\]: an empty shape"):
        stoke.Loader(LISTS, columns=["ints"], pad={"ints": ()})
