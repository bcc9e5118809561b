"""Training from Python (`lector.train`) equals `lector train`: the same settings give the CLI's
weights bit for bit, and a CLI run killed mid-way is resumed from Python to the uninterrupted
run's weights. A tiny BERT (lector-models' fixture) on a SQuAD v1.1 train slice keeps it fast."""

import json
import subprocess
import time
from pathlib import Path

import pytest

import lector
import lector.train

from conftest import REPO, run_cli

TINY_BERT = REPO / "crates" / "lector-models" / "tests" / "fixtures" / "tiny-bert"
SETTINGS = dict(epochs=3, batch_size=4, save_every=4, max_seq_len=64, doc_stride=16, lr=1e-3, seed=7)


def squad_slice(path: Path, n: int) -> str:
    """The first paragraphs of SQuAD v1.1 train holding at least `n` questions."""
    data = json.loads(open(lector.eval.shared_data("squad/train-v1.1.json")).read())
    paragraphs, count = [], 0
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            paragraphs.append(paragraph)
            count += len(paragraph["qas"])
            if count >= n:
                path.write_text(json.dumps({"version": "1.1", "data": [{"title": "slice", "paragraphs": paragraphs}]}))
                return str(path)
    raise AssertionError("SQuAD v1.1 train is shorter than asked")


def cli_args(train: str, out: Path) -> list:
    args = ["train", "reader", "--model", str(TINY_BERT), "--train", train, "--out", str(out)]
    for key, value in SETTINGS.items():
        args += ["--" + key.replace("_", "-"), str(value)]
    return args


def losses(out: Path) -> list:
    return [(row["step"], row["loss"]) for row in map(json.loads, (out / "train-log.jsonl").read_text().splitlines())]


def weights(out: Path) -> bytes:
    return (out / "model.safetensors").read_bytes()


def test_a_reader_trained_from_python_equals_the_clis_and_resumes_a_killed_run(lector_bin, tmp_path):
    train = squad_slice(tmp_path / "train.json", 60)
    whole = tmp_path / "whole"
    cli = json.loads(run_cli(lector_bin, *cli_args(train, whole), "--json"))

    ours = lector.train.reader(tmp_path / "ours", [train], model=TINY_BERT, **SETTINGS)
    assert (ours["steps"], ours["windows"]) == (cli["steps"], cli["windows"]) and ours["steps"] > 12
    assert losses(tmp_path / "ours") == losses(whole)
    assert weights(tmp_path / "ours") == weights(whole)
    assert weights(whole) != (TINY_BERT / "model.safetensors").read_bytes()
    prediction = lector.Reader(tmp_path / "ours").read("What flows through Bonn?", "The Rhine flows through Bonn.")
    assert prediction.answers

    # A CLI run killed after its first checkpoint, resumed from Python.
    killed = tmp_path / "killed"
    child = subprocess.Popen([str(lector_bin), *cli_args(train, killed)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    try:
        while not ((killed / "checkpoint" / "state.json").is_file() and (killed / "train-log.jsonl").is_file()
                   and len((killed / "train-log.jsonl").read_text().splitlines()) >= 6):
            assert time.monotonic() < deadline, "no checkpoint within 5 minutes"
            time.sleep(0.005)
        assert child.poll() is None, "the run ended before it could be killed"
    finally:
        child.kill()  # by the pid this test started
        child.wait()
    assert len(losses(killed)) < len(losses(whole))
    resumed = lector.train.reader(killed, resume=True)
    assert resumed["steps"] == cli["steps"]
    assert [s for s, _ in losses(killed)] == [s for s, _ in losses(whole)]
    assert weights(killed) == weights(whole)

    with pytest.raises(ValueError, match="resume reads"):
        lector.train.reader(killed, [train], resume=True)
    with pytest.raises(ValueError, match="unknown kind"):
        lector.train.retriever(tmp_path / "r", [train], kind="colbert")
    with pytest.raises(lector.LectorError, match="--resume|already"):
        lector.train.reader(whole, [train], model=TINY_BERT, **SETTINGS)


@pytest.mark.parametrize("kind", ["embedder", "reranker"])
def test_an_embedder_or_reranker_trained_from_python_equals_the_clis(lector_bin, tmp_path, kind):
    train = squad_slice(tmp_path / "train.json", 24)
    index = lector.Index(tmp_path / "index")
    index.add(paths=[train])
    cli_out = tmp_path / "cli"
    cli = json.loads(run_cli(lector_bin, "train", kind, "--model", str(TINY_BERT), "--train", train,
                             "--negatives-from", str(tmp_path / "index"), "--epochs", "2", "--batch-size", "8",
                             "--lr", "2e-3", "--max-tokens", "64", "--no-dropout", "--out", str(cli_out), "--json"))
    ours = lector.train.retriever(tmp_path / "ours", [train], kind=kind, model=TINY_BERT,
                                  negatives_from=tmp_path / "index", epochs=2, batch_size=8, lr=2e-3, max_tokens=64,
                                  dropout=False)
    assert (ours["steps"], ours["windows"]) == (cli["steps"], cli["windows"]) and ours["steps"] > 0
    assert losses(tmp_path / "ours") == losses(cli_out)
    assert weights(tmp_path / "ours") == weights(cli_out)
