"""What the clocks say stands under the comparison as its own labelled line, D1's words kept."""

from __future__ import annotations

import pandas as pd

from kit.report import clocks, markdown


def test_the_clocks_line_is_labelled_and_leaves_the_verdict_alone() -> None:
    row = {
        "contender_build": "mica", "verdict": "faster", "times_alone_say": "faster",
        "pytorch_modes_without_time": "",
        "clocks_say": f"{clocks.AMBIGUOUS} (by cycles slower, by time faster)",
    }  # fmt: skip
    lines = markdown._comparison_notes(pd.DataFrame([row]))
    assert lines == [
        "- Clocks, mica (the kit's diagnostic, outside §10): ambiguous: the clocks differed "
        "between the sides (by cycles slower, by time faster)."
    ]
    assert markdown._comparison_notes(pd.DataFrame([row | {"clocks_say": ""}])) == []
