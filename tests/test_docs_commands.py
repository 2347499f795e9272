"""Every command the README and docs/ show runs as written: each `python train.py ...`,
`evaluate.py`, `report.py`, `scripts/*.py`, `benchmarks/*.py` and `examples/*.py` line of their
bash blocks, and of the README's and docs/' inline code (tables and prose), is parsed by the real command's argument parser (unknown or misspelt options, bad
values and missing required ones fail), and every linked file and section exists."""
import argparse
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "notebook").glob("*.md"))]
SCRIPTS = {"train.py": "glimpse/commands/train.py", "evaluate.py": "glimpse/commands/evaluate.py",
           "report.py": "glimpse/commands/report.py", "glimpse-train": "glimpse/commands/train.py",
           "glimpse-evaluate": "glimpse/commands/evaluate.py", "glimpse-report": "glimpse/commands/report.py"}


class Parsed(Exception):
    """Raised by the patched parser once the command line parsed: nothing runs."""


def commands():
    for document in DOCUMENTS:
        text = document.read_text()
        lines = [line.split(" #", 1)[0].strip() for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)
                 for line in block.replace("\\\n", " ").splitlines()]
        if document.parent.name != "notebook":  # and the guides' inline commands (tables, prose); the log keeps history
            lines += re.findall(r"`((?:python|glimpse-\w+) [^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        for line in lines:
            for part in (p.strip() for p in re.split(r"&&|;", line)):
                words = shlex.split(part) if part else []
                if words[:1] == ["python"] and len(words) > 1 and words[1].endswith(".py"):
                    yield document.name, words[1], words[2:]
                elif words[:1] and words[0] in SCRIPTS and words[0].startswith("glimpse-"):
                    yield document.name, words[0], words[1:]


COMMANDS = list(commands())


def load(script: str):
    path = ROOT / SCRIPTS.get(script, script)
    spec = importlib.util.spec_from_file_location(f"doc_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_documents_show_commands():
    scripts = {script for _, script, _ in COMMANDS}
    assert {"train.py", "evaluate.py", "report.py"} <= scripts


@pytest.mark.parametrize("document,script,argv", COMMANDS, ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_a_documented_command_parses(document, script, argv, monkeypatch, capsys):
    if "--help" in argv:
        argv = [a for a in argv if a != "--help"]
    original = argparse.ArgumentParser.parse_args
    parsed = []

    def parse_then_stop(self, args=None, namespace=None):
        parsed.append(original(self, args, namespace))
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    assert (ROOT / SCRIPTS.get(script, script)).is_file(), f"{document}: no {script}"
    with pytest.raises(Parsed):
        try:
            load(script).main(argv)
        except SystemExit as exit_:
            pytest.fail(f"{document}: `{script} {' '.join(argv)}` does not parse: {capsys.readouterr().err}"
                        f" (exit {exit_.code})")
    if SCRIPTS.get(script, script).endswith("commands/train.py") and parsed[0].resume is None:
        from glimpse.training.config import config_from_args

        try:  # the options make a run: none out of range, none its model does not use
            config_from_args(parsed[0])
        except ValueError as exc:
            pytest.fail(f"{document}: `{script} {' '.join(argv)}` is refused: {exc}")


def anchors(document: Path) -> set[str]:
    """The anchors GitHub gives a markdown file's headings: lower case, punctuation dropped, spaces to '-'."""
    headings = re.findall(r"^#+\s+(.*)$", document.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_linked_files_and_sections_exist(document):
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", document.read_text()):
        if "://" in target:
            continue
        linked = (document.parent / target) if target else document
        assert linked.exists(), f"{document.name} links to missing {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{document.name} links to a missing section {target}#{anchor}"


def test_the_quickstart_block_is_a_real_run_s_output():
    """The README's Quickstart output is written by scripts/quickstart_block.py from a real run, and
    says when and where; a hand-edited block would lack its line."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- quickstart:start -->", 1)[1].split("<!-- quickstart:end -->", 1)[0]
    assert re.search(r"test accuracy 0\.\d{4} \(error \d+\.\d\d %\) on 10000 test canvases", block)
    assert "(Made by `python scripts/quickstart_block.py --data-dir DIR --write` on 20" in block and "torch thread" in block
