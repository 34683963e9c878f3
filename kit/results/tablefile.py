"""The CSV tables a results directory publishes: written with every digit and a schema
version, read back upgraded (an older table) or refused (a newer one)."""

from __future__ import annotations

from pathlib import Path
from typing import IO

import pandas as pd

from kit.errors import UserError
from kit.results import fields

# the version of every tables/*.csv, carried in each as its first column; 2: runs.csv and
# comparison.csv gained the clock columns (kit.report.clocks), recomputed for an older table
TABLE_SCHEMA = 2
TABLE_SCHEMA_COLUMN = "schema_version"


def csv_text(df: pd.DataFrame) -> str:
    """A table as the kit publishes it: every digit, and its schema version as the first
    column (other tools read the CSVs alone)."""
    df = df.copy()
    df.insert(0, TABLE_SCHEMA_COLUMN, TABLE_SCHEMA)
    return df.to_csv(index=False, float_format="%.17g")


def read_table(source: str | Path | IO[str]) -> pd.DataFrame:
    """A published table, upgraded to this kit's schema; one from a newer kit is refused.

    Schema 0 is a table from before the column existed: the same columns, nothing to change.
    """
    df = pd.read_csv(source, keep_default_na=False, na_values=[""])
    if TABLE_SCHEMA_COLUMN not in df.columns:
        return df  # schema 0 -> 1: only the version column was added
    versions = set(df[TABLE_SCHEMA_COLUMN].astype(str))
    newer = [v for v in versions if not v.isdigit() or int(v) > TABLE_SCHEMA]
    if newer:
        raise UserError(
            f"table schema {newer[0]}; this kit reads table schema {TABLE_SCHEMA} and older",
            "verify it with the kit version named in the directory's manifest.json",
        )
    return df.drop(columns=[TABLE_SCHEMA_COLUMN])


def schema_of(path: Path) -> int:
    """The schema version a published table carries (0 before the column existed)."""
    with path.open(encoding="utf-8") as lines:
        header, first = lines.readline(), lines.readline()
    if not header.startswith(TABLE_SCHEMA_COLUMN + ","):
        return 0
    version = first.split(",", 1)[0].strip()
    return int(version) if version.isdigit() else TABLE_SCHEMA


def as_older(published: pd.DataFrame, recomputed: pd.DataFrame, schema: int) -> pd.DataFrame:
    """The recomputed table as a table of an older `schema` holds it: the columns a later kit
    added, which the published table lacks, left out (verify of a directory written before).
    A per-run field added since (kit.results.fields.LATER) is left out where it is absent."""
    if schema >= TABLE_SCHEMA:
        later = [c for c in fields.LATER if c in recomputed and c not in published]
        return recomputed.drop(columns=later)
    if not set(published.columns) <= set(recomputed.columns):
        return recomputed
    return recomputed[[c for c in recomputed.columns if c in set(published.columns)]]
