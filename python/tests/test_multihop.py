"""Multi-hop questions from Python (`Pipeline.ask(hops=2)`) equal `lector ask --hops 2 --json`,
on a HotpotQA comparison question's paragraphs from the shared data."""

import json

import pytest

import lector

from conftest import run_cli


def comparison_question() -> dict:
    path = lector.eval.shared_data("hotpotqa/hotpot_dev_distractor_sample1100.json")
    with open(path) as f:
        questions = json.load(f)
    return next(q for q in questions[:60] if q["type"] == "comparison")


def without_timings(response: dict) -> dict:
    response = json.loads(json.dumps(response))
    response.pop("timings", None)
    response["hops"].pop("hop_ms", None)
    return response


def test_a_multi_hop_answer_equals_the_clis(lector_bin, tmp_path):
    question = comparison_question()
    index = lector.Index(str(tmp_path / "index"))
    index.add([{"id": title, "title": title, "text": "".join(sentences)} for title, sentences in question["context"]])
    cli = json.loads(run_cli(lector_bin, "ask", question["question"], "--index", str(tmp_path / "index"), "--hops", "2", "--json"))

    response = lector.Pipeline(index).ask(question["question"], hops=2)
    assert response.hops["kind"] == "comparison" and len(response.hops["chain"]) == 2
    assert without_timings(response.raw) == without_timings(cli)
    assert response.answer is not None and response.answer.text in question["question"]

    narrow = lector.Pipeline(index).ask(question["question"], hops=2, beam=2, paths=3)
    assert narrow.hops["hops"] == 2 and len(narrow.hops["paths"]) <= 3
    with pytest.raises(lector.LectorError, match="no passage vectors"):
        lector.Pipeline(index).ask(question["question"], hops=2, second_hop="dense")
    with pytest.raises(ValueError, match="second hop"):
        lector.Pipeline(index).ask(question["question"], hops=2, second_hop="sideways")
    with pytest.raises(ValueError, match="hops"):
        lector.Pipeline(index).ask(question["question"], hops=3)
