"""A Holm-adjusted p-value depends on every pair of its table, so it changes whenever a run joins the
report: each one the guides (README.md, docs/*.md) quote must still stand in a generated table's row
beside the two counts it is quoted with."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TABLES = [*sorted((ROOT / "reports").rglob("*.md")), *sorted((ROOT / "docs").glob("*.md"))]
# "172 to 118, Holm 0.033", "159 canvases to 99, Holm p = 0.013", "274 to 172, Holm p = 5.1e-5"
QUOTE = re.compile(r"(\d[\d,]*) (?:canvases )?to (\d[\d,]*), Holm (?:p = )?([0-9][0-9.e-]*[0-9])")


def cell(text: str) -> str:
    """A number's value whatever its spelling (``5.1e-5`` and ``5.1e-05``, ``1,204`` and ``1204``)."""
    text = text.strip().replace(",", "")
    try:
        return repr(float(text))
    except ValueError:
        return text


def table_rows() -> list[set[str]]:
    return [{cell(c) for c in line.strip().strip("|").split("|")}
            for table in TABLES for line in table.read_text().splitlines() if line.startswith("|")]


def quotes(document: Path) -> list[tuple[str, str, str]]:
    return QUOTE.findall(re.sub(r"\s+", " ", document.read_text()))


def test_the_pattern_finds_the_quotes():
    text = "level (140 to 118, Holm\n  0.85) and ahead (274 to 172, Holm p = 5.1e-5); (12 to 3, p = 0.04)"
    assert QUOTE.findall(re.sub(r"\s+", " ", text)) == [("140", "118", "0.85"), ("274", "172", "5.1e-5")]


@pytest.mark.parametrize("document", GUIDES, ids=lambda p: p.name)
def test_quoted_holm_values_stand_in_a_generated_table(document):
    rows = table_rows()
    stale = [f"{a} to {b}, Holm {p}" for a, b, p in quotes(document)
             if not any({cell(a), cell(b), cell(p)} <= row for row in rows)]
    assert not stale, f"{document.name} quotes paired counts no table has (rebuilt since?): {stale}"
