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


# An unadjusted paired test, quoted with its p-value: "62 canvases to 53 for Show-Attend-Tell, p = 0.46",
# "87 canvases to 74 against its own seed (p = 0.34)", "80 canvases to 109 (McNemar p = 0.041".
PAIRED = re.compile(r"(\d+(?:,\d{3})*) (?:canvases )?to (\d+(?:,\d{3})*)(?: (?:for|against) [^,;()]{1,40}?)?(?:,| \()? ?"
                    r"(?:McNemar )?p = (\d(?:[\d.e-]*\d)?)")
# Quoted pairs whose checkpoints or records the clone no longer holds, so no stored result backs them.
DRAM_80 = ("DRAM's 80-epoch seeds, removed when the family's budget went to 160: seed 1's record "
           "(git show ee8fd0a:reports/converged/records/dram-converged-seed1.pt) and seed 0, shipped as "
           "dram-cluttered60.pt until its 160-epoch run replaced it (git show e34eebf:checkpoints/dram-cluttered60.pt)")
NOT_KEPT = {
    ("94", "91", "0.88"): "DRAM's 20-epoch restart on 60x60 (not kept)",
    ("40", "42", "0.91"): "the fine ResNet's 100x100 seed 0 (not kept; seed 1 ships)",
    ("126", "99", "0.08"): "DRAM with a summed glimpse network (not kept)",
    ("80", "107", "0.06"): "DRAM with a summed glimpse network (not kept)",
    ("258", "262", "0.90"): "DRAM's second two-digit stage (not kept)",
    ("130", "125", "0.80"): DRAM_80,
}


def paired_quotes(document: Path) -> list[tuple[str, str, str]]:
    return PAIRED.findall(re.sub(r"\s+", " ", document.read_text()))


def stored_pairs() -> list[tuple[int, int, float]]:
    """(only_a, only_b, p) of every stored paired test: every two records of the converged report
    scored on the same canvases, the shipped checkpoints' (checkpoints/scores.json) and the one-off
    ones of reports/comparisons.json (scripts/comparisons.py)."""
    import json

    import torch

    from glimpse.benchmark import canvas_recipe
    from glimpse.stats import mcnemar

    pairs = [(row["only_a"], row["only_b"], row["p"])
             for row in json.loads((ROOT / "checkpoints" / "scores.json").read_text())["paired"]]
    pairs += [(row["only_a"], row["only_b"], row["p"])
              for row in json.loads((ROOT / "reports" / "comparisons.json").read_text())["comparisons"]]
    by_canvases: dict[tuple, list] = {}
    for path in sorted((ROOT / "reports" / "converged" / "records").glob("*.pt")):
        record = torch.load(path, weights_only=True)
        for canvas_set, right in record["right"].items():
            by_canvases.setdefault((canvas_recipe(record["task"]), canvas_set), []).append(right.numpy())
    for rights in by_canvases.values():
        for i, right_a in enumerate(rights):
            for right_b in rights[i + 1:]:
                test = mcnemar(right_a, right_b)
                pairs.append((test["only_a"], test["only_b"], test["p"]))
    return pairs


def quoted_as(p: float, quoted: str) -> bool:
    """Whether ``p`` reads as ``quoted`` when rounded to as many significant digits ("0.80": two)."""
    digits = len(quoted.split("e")[0].replace(".", "").lstrip("0")) or 1
    return float(f"{p:.{digits}g}") == float(quoted)


def test_the_paired_pattern_finds_unadjusted_quotes_only():
    text = ("62 canvases to 53 for Show-Attend-Tell, p = 0.46; 87 canvases to 74 against its own seed\n (p = 0.34); "
            "80 canvases to 109 (McNemar p = 0.041); 94 to 120, p = 0.087; 159 canvases to 99, Holm p = 0.013; 56 to 40")
    assert PAIRED.findall(re.sub(r"\s+", " ", text)) == [("62", "53", "0.46"), ("87", "74", "0.34"),
                                                        ("80", "109", "0.041"), ("94", "120", "0.087")]
    assert quoted_as(0.0598, "0.06") and quoted_as(0.802, "0.80") and quoted_as(1.3897e-5, "1.4e-5")
    assert quoted_as(0.99999999, "1") and not quoted_as(0.0598, "0.059") and not quoted_as(0.46, "0.47")


@pytest.fixture(scope="module")
def pairs():
    return stored_pairs()


@pytest.mark.parametrize("document", GUIDES, ids=lambda p: p.name)
def test_quoted_paired_tests_stand_in_a_stored_result(document, pairs):
    unbacked = [(a, b, p) for a, b, p in paired_quotes(document) if (a, b, p) not in NOT_KEPT
                and not any(sorted((only_a, only_b)) == sorted((int(a.replace(",", "")), int(b.replace(",", "")))) and
                            quoted_as(p_stored, p) for only_a, only_b, p_stored in pairs)]
    assert not unbacked, (f"{document.name} quotes paired tests no stored result backs (store them with "
                          f"scripts/comparisons.py --add A B): {unbacked}")


def test_stored_comparisons_name_the_files_they_scored():
    """A checkpoint shipped anew under the old name leaves the stored pairs naming it stale: caught
    here by the files' digests, without scoring anything (scripts/comparisons.py --check scores)."""
    import json

    from glimpse.report.records import file_sha256

    def digest(path: str) -> str:
        return file_sha256(ROOT / path)[:16]

    stale = [entry["command"] for entry in json.loads((ROOT / "reports" / "comparisons.json").read_text())["comparisons"]
             if (entry["digest_a"], entry["digest_b"]) != (digest(entry["a"]), digest(entry["b"]))]
    assert not stale, f"stored pairs whose checkpoints were replaced since (drop them, or --add them again): {stale}"


def test_every_unkept_quote_is_still_quoted():
    quoted = {quote for document in GUIDES for quote in paired_quotes(document)}
    assert set(NOT_KEPT) <= quoted, f"no guide quotes these any more: drop them from NOT_KEPT: {set(NOT_KEPT) - quoted}"



def section_rows(text: str, heading: str) -> list[list[str]]:
    """The cells of each table row under ``heading`` (up to the next heading of its level or above)."""
    body = text.split(heading + "\n", 1)[1]
    body = re.split(r"\n#{1,%d} " % heading.count("#"), body, maxsplit=1)[0]
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in body.splitlines() if line.startswith("|") and not line.startswith("|---")][1:]


def test_the_two_estimators_table_is_the_reports():
    """docs/gradients.md's estimator control quotes the converged report's "One policy, two
    estimators" rows: each value and both ends of its interval, to the three digits shown."""
    estimators = ["reparameterised, exact", "reparameterised, as trained", "score function, leave-one-out"]
    report = {(weights, k, estimator): [float(value), *map(float, interval.split(" to "))]
              for _, weights, k, estimator, value, interval, *_ in
              section_rows((ROOT / "reports/converged/compare.md").read_text(), "## One policy, two estimators")}
    quoted = section_rows((ROOT / "docs/gradients.md").read_text(), "### One policy, two estimators")
    assert len(quoted) == 6 and len(report) == 18
    checked = 0
    for weights, k, *cells in quoted:
        for estimator, text in zip(estimators, cells, strict=True):
            value, low, high = map(float, re.fullmatch(r"(\S+) \((\S+) to (\S+)\)", text).groups())
            assert [value, low, high] == pytest.approx(report[weights, k, estimator], rel=6e-3), (weights, k, estimator)
            checked += 1
    assert checked == 18


def test_the_readme_quotes_the_reports_recorded_training_time():
    """The README's cost of a full retrain is the converged report's own total."""
    report = re.search(r"Recorded training time of all \d+ runs of this report[^:]*: (\d+) minutes",
                       (ROOT / "reports/converged/compare.md").read_text())
    readme = re.search(r"the records hold ([\d,]+) minutes of recorded training", (ROOT / "README.md").read_text())
    assert report and readme, "the sentence moved: update this test's patterns"
    assert int(readme.group(1).replace(",", "")) == int(report.group(1))
