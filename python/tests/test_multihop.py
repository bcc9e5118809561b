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


def hop_timeless(report: dict) -> dict:
    report = json.loads(json.dumps(report))
    report.pop("hop_ms", None)
    for row in report.get("per_question", []):
        row.pop("hop_ms", None)
    return report


def test_eval_hotpot_run_gives_the_clis_numbers(lector_bin, tmp_path):
    data = lector.eval.shared_data("hotpotqa/hotpot_dev_distractor_sample1100.json")
    rows, predictions, html = tmp_path / "rows.jsonl", tmp_path / "pred.json", tmp_path / "cli.html"
    cli = json.loads(run_cli(lector_bin, "eval", "hotpot", data, "--offset", "10", "--limit", "6", "--hops", "2",
                             "--json", "--per-question", str(rows), "--predictions", str(predictions),
                             "--html", str(html)))
    cli["per_question"] = [json.loads(line) for line in rows.read_text().splitlines()]
    ours = lector.eval.hotpot_run(data, offset=10, limit=6, hops=2, per_question=True, predictions=True,
                                  html=tmp_path / "ours.html")
    assert ours.pop("predictions") == json.loads(predictions.read_text())
    assert hop_timeless(ours) == hop_timeless(cli)
    assert ours["questions"] == 6 and ours["setting"] == "distractor" and ours["hops"] == 2
    # The official script's numbers, from the predictions the run made.
    with open(data) as f:
        gold = json.load(f)[10:16]
    assert lector.eval.hotpot(gold, {"answer": {r["id"]: r["prediction"] for r in ours["per_question"]},
                                     "sp": json.loads(predictions.read_text())["sp"]})["f1"] == ours["metrics"]["f1"]
    assert "By question type" in (tmp_path / "ours.html").read_text()

    with pytest.raises(ValueError, match="setting"):
        lector.eval.hotpot_run(data, setting="closed")
    with pytest.raises(lector.LectorError, match="no questions at offset"):
        lector.eval.hotpot_run(data, offset=5000)
    with pytest.raises(lector.LectorError, match="llm decomposition"):
        lector.eval.hotpot_run(data, limit=1, hops=2, decompose="llm")
