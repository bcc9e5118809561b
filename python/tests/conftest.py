"""Fixtures of the Python package's tests: the `lector` binary they compare with, the bundled
sample, and an index of its paragraphs with the CLI's answers to its first questions."""

import json
import os
import subprocess
from pathlib import Path

import pytest

# Haystack sends usage telemetry by default; tests reach nothing beyond this machine.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "squad-v1.1-sample.json"
#: Questions of the sample asked end to end (reading them all takes ~20 s per face).
ODQA_QUESTIONS = 60


@pytest.fixture(scope="session")
def lector_bin() -> Path:
    """The CLI built from this checkout (`$LECTOR_BIN`, else target/debug/lector)."""
    path = Path(os.environ.get("LECTOR_BIN", REPO / "target" / "debug" / "lector"))
    assert path.is_file(), f"{path} is missing: build it with `cargo build -p lector-cli`"
    return path


def run_cli(lector_bin: Path, *args: str) -> str:
    done = subprocess.run([str(lector_bin), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"lector {' '.join(args)} failed:\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="session")
def sample() -> dict:
    return json.loads(SAMPLE.read_text())


@pytest.fixture(scope="session")
def odqa(lector_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`lector eval odqa` over the sample: the index it builds (kept) and its per-question answers."""
    work = tmp_path_factory.mktemp("odqa")
    index, per_question = work / "index", work / "per-question.jsonl"
    run_cli(
        lector_bin, "eval", "odqa", "--squad", str(SAMPLE), "--index", str(index),
        "--limit", str(ODQA_QUESTIONS), "--per-question", str(per_question), "--json",
    )
    rows = [json.loads(line) for line in per_question.read_text().splitlines()]
    assert len(rows) == ODQA_QUESTIONS
    return {"index": str(index), "rows": rows}
