"""tables/*.csv carry a schema version: written first, an older table upgraded on reading, a
newer one refused with what to do."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from kit.errors import UserError
from kit.results.tablefile import TABLE_SCHEMA, csv_text, read_table


def test_written_with_the_version_first_and_every_digit():
    df = pd.DataFrame({"config": ["a"], "median_step_s": [0.1 + 0.2]})
    text = csv_text(df)
    assert text.splitlines()[0] == "schema_version,config,median_step_s"
    assert text.splitlines()[1] == f"{TABLE_SCHEMA},a,0.30000000000000004"
    assert list(df.columns) == ["config", "median_step_s"]  # the caller's frame is untouched
    back = read_table(io.StringIO(text))
    pd.testing.assert_frame_equal(back, df)


def test_a_table_without_the_column_is_schema_zero_and_read_as_it_is():
    back = read_table(io.StringIO("config,median_step_s\na,0.5\n"))
    assert list(back.columns) == ["config", "median_step_s"]


@pytest.mark.parametrize("version", [str(TABLE_SCHEMA + 1), "x"])
def test_a_newer_or_unknown_version_is_refused(version):
    with pytest.raises(UserError) as e:
        read_table(io.StringIO(f"schema_version,config\n{version},a\n"))
    assert f"table schema {version}" in e.value.message
    assert e.value.fix and "manifest.json" in e.value.fix
