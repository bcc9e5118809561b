"""lector's Python API against its CLI, on the bundled sample and the shared data."""

import json
from pathlib import Path
import threading

import pytest

import lector
from conftest import REPO, SAMPLE, run_cli


def sample_pairs(sample):
    return [
        (qa["id"], qa["question"], paragraph["context"])
        for article in sample["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]


def test_reader_answers_equal_the_cli_and_score_the_same(lector_bin, sample, tmp_path):
    pred_file = tmp_path / "pred.json"
    run_cli(lector_bin, "read", "--squad", str(SAMPLE), "--out", str(pred_file))
    cli_predictions = json.loads(pred_file.read_text())
    cli_scores = json.loads(run_cli(lector_bin, "eval", "squad", str(SAMPLE), str(pred_file), "--json",
                                    "--by", "qtype,overlap"))

    pairs = sample_pairs(sample)
    predictions = lector.Reader().read_batch([(q, c) for _, q, c in pairs])
    ours = {qid: p.answer.text for (qid, _, _), p in zip(pairs, predictions)}
    assert len(ours) == 216
    assert ours == cli_predictions
    scores = lector.eval.squad(sample, ours, by=lector.eval.BREAKDOWNS, html=tmp_path / "squad.html")
    assert scores == cli_scores and {name for name, _ in scores["intervals"]} >= {"exact_match", "f1"}
    assert (tmp_path / "squad.html").read_text().count("<svg") >= 1
    assert scores["exact_match"] == cli_scores["exact_match"]
    assert scores["f1"] == cli_scores["f1"]
    # The breakdowns, intervals included, are the CLI's to the last digit.
    assert scores["breakdowns"] == cli_scores["breakdowns"]
    assert sum(g["questions"] for g in scores["breakdowns"]["qtype"]) == 216
    with pytest.raises(ValueError, match="unknown breakdown `length`"):
        lector.eval.squad(sample, ours, by="length")
    # Offsets are characters of the context.
    _, question, context = pairs[0]
    best = lector.Reader().read(question, context).answer
    assert context[best.start : best.end] == best.text


def test_pipeline_answers_equal_lector_eval_odqa_and_lector_ask(lector_bin, odqa):
    index = lector.Index(odqa["index"])
    pipeline = lector.Pipeline(index)
    rows = odqa["rows"]
    responses = pipeline.ask_many([r["question"] for r in rows])
    for row, response in zip(rows, responses):
        assert (response.answer.text if response.answer else None) == row["prediction"], row["question"]
        assert response.na_prob == row["na_prob"]
    abstained = sum(r.answer is None for r in responses)
    assert abstained == sum(r["prediction"] is None for r in rows) and abstained > 0

    question = rows[0]["question"]
    cli = json.loads(run_cli(lector_bin, "ask", question, "--index", odqa["index"], "--json"))
    ours = pipeline.ask(question).raw
    for key in ("answer", "candidates", "na_prob", "threshold", "abstention"):
        assert ours[key] == cli[key], key
    evidence = pipeline.ask(question).answer.evidence
    assert evidence.passage_text[evidence.passage_start : evidence.passage_end] == cli["answer"]["text"]


def test_index_adds_replaces_filters_deletes_and_sees_the_clis_commits(lector_bin, tmp_path):
    index = lector.Index(tmp_path / "ix")
    docs = [
        lector.Document("a", "The Eiffel Tower is in Paris.", title="Paris", metadata={"year": 2021, "lang": "en"}),
        {"id": "b", "text": "The Colosseum is in Rome.", "meta": {"year": 2019, "lang": "en"}},
        {"id": "c", "text": "Der Eiffelturm steht in Paris.", "metadata": {"year": 2023, "lang": "de"}},
    ]
    counts = index.add(docs)
    assert (counts["added"], counts["documents"]) == (3, 3)
    again = index.add([docs[1], {"id": "c", "text": "Der Eiffelturm steht in Paris, Frankreich."}])
    assert (again["added"], again["unchanged"], again["replaced"]) == (0, 1, 1)

    hits = index.search("Eiffel Tower Paris", k=3)
    assert hits[0].doc_id == "a" and hits[0].metadata == {"year": 2021, "lang": "en"}
    assert hits[0].text == "The Eiffel Tower is in Paris." and (hits[0].start, hits[0].end) == (0, 29)
    assert [h.doc_id for h in index.search("Paris", filter='year >= 2020 and lang == "en"')] == ["a"]
    haystack_filter = {"field": "meta.lang", "operator": "==", "value": "en"}
    assert {h.doc_id for h in index.search("Eiffel Tower Paris Colosseum Rome", filter=haystack_filter)} == {"a", "b"}

    # A commit made by the CLI is seen after reload().
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"id": "d", "text": "Big Ben is in London."}) + "\n")
    run_cli(lector_bin, "index", "add", str(extra), "--index", index.path)
    assert not index.search("London")
    index.reload()
    assert [h.doc_id for h in index.search("London")] == ["d"]

    assert index.delete(["b", "missing"]) == 1
    assert index.stats()["documents"] == 3
    assert not index.search("Colosseum Rome")


def test_bad_input_names_the_document_and_keeps_the_index(tmp_path):
    index = lector.Index(tmp_path / "ix")
    index.add([{"id": "a", "text": "kept"}])
    with pytest.raises(ValueError, match=r"documents\[1\]: .*no `text`"):
        index.add([{"id": "b", "text": "fine"}, {"id": "c"}])
    assert index.stats()["documents"] == 1
    with pytest.raises(ValueError, match="filter: "):
        index.search("kept", filter="year >>> 3")
    with pytest.raises(lector.LectorError, match="nowhere"):
        lector.Index(tmp_path / "nowhere").search("anything")
    with pytest.raises(lector.LectorError, match="no-such-model"):
        lector.Reader(tmp_path / "no-such-model")
    with pytest.raises(ValueError, match="unknown ask option `bogus`"):
        lector.Pipeline(index).ask("kept?", bogus=1)


def test_the_gil_is_released_while_rust_works(sample):
    reader = lector.Reader()
    pairs = [(q, c) for _, q, c in sample_pairs(sample)][:64]
    worker = threading.Thread(target=reader.read_batch, args=(pairs,))
    ticks = 0
    worker.start()
    while worker.is_alive():
        ticks += 1
    worker.join()
    # Holding the GIL for the whole batch would leave this thread a handful of ticks at most.
    assert ticks > 10_000


def test_eval_scores_retrieval_and_hotpot():
    qrels = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
    run = {"q1": {"d2": 0.9, "d1": 0.5}, "q2": {"d4": 0.8, "d5": 0.7}}
    scores = lector.eval.retrieval(qrels, run, ks=[1, 3])
    assert scores["queries"]["q1"]["mrr"] == 0.5 and scores["queries"]["q1"]["p@1"] == 0.0
    assert scores["queries"]["q1"]["recall@3"] == 1.0 and scores["queries"]["q2"]["recall@3"] == 0.0
    assert scores["mean"]["mrr"] == 0.25

    gold = json.loads(open(lector.eval.shared_data("hotpotqa/hotpot_dev_distractor_sample1100.json")).read())[:40]
    perfect = {"answer": {q["_id"]: q["answer"] for q in gold}, "sp": {q["_id"]: q["supporting_facts"] for q in gold}}
    assert lector.eval.hotpot(gold, perfect)["joint_em"] == 1.0
    perfect["answer"][gold[0]["_id"]] = "certainly not the answer"
    metrics = lector.eval.hotpot(gold, perfect)
    assert metrics["em"] == pytest.approx(39 / 40) and metrics["sp_em"] == 1.0
    with pytest.raises(lector.LectorError, match="question 0"):
        lector.eval.hotpot([{"question": "no id"}], perfect)


def calibrate_cli(lector_bin, *args):
    return json.loads(run_cli(lector_bin, "calibrate", "--json", *args))


def test_calibrate_gives_the_clis_numbers_and_the_pipeline_uses_what_it_stored(lector_bin, odqa, tmp_path):
    import shutil

    # Gold paragraphs of SQuAD v2.0 (answerable and unanswerable), nothing written.
    v2 = lector.eval.shared_data("squad/dev-v2.0.json")
    index = lector.Index(odqa["index"])
    ours = lector.calibrate(index, v2, limit=40, dry_run=True, html=tmp_path / "ours.html")
    cli = calibrate_cli(lector_bin, "--squad", v2, "--limit", "40", "--dry-run", "--index", odqa["index"],
                        "--html", str(tmp_path / "cli.html"))
    assert (tmp_path / "ours.html").read_text() == (tmp_path / "cli.html").read_text()
    for key in ("calibration", "chosen", "default", "confidence"):
        assert ours[key] == cli[key], key
    assert ours["written"] is None and cli["written"] is None
    assert ours["calibration"]["questions"] == 40

    # Read from the index's top 3 passages, stored: the CLI's numbers on a copy of the index.
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    shutil.copytree(odqa["index"], mine)
    shutil.copytree(odqa["index"], theirs)
    ours = lector.calibrate(lector.Index(mine), SAMPLE, retrieve=3, limit=30, target="precision=0.9")
    cli = calibrate_cli(lector_bin, "--squad", str(SAMPLE), "--retrieve", "3", "--limit", "30",
                        "--target", "precision=0.9", "--index", str(theirs))
    for key in ("calibration", "chosen", "default", "confidence"):
        assert ours[key] == cli[key], key
    assert (mine / "calibration.json").read_text() == (theirs / "calibration.json").read_text()
    response = lector.Pipeline(lector.Index(mine)).ask(odqa["rows"][0]["question"])
    assert response.calibrated and response.threshold == ours["calibration"]["threshold"]
    assert response.answer is None or response.answer.confidence is not None

    # Measured on other questions, nothing written; bad options are ValueErrors.
    checked = lector.calibrate(lector.Index(mine), v2, limit=20, evaluate=True)
    assert checked["evaluated"] == ours["calibration"] and checked["questions"] == 20
    with pytest.raises(ValueError, match="confidence must be"):
        lector.calibrate(index, v2, confidence="magic", dry_run=True)
    with pytest.raises(ValueError, match="precision"):
        lector.calibrate(index, v2, target="precision=7", dry_run=True)


def test_eval_odqa_gives_the_clis_numbers(lector_bin, odqa, tmp_path):
    # The CLI indexes the sample's paragraphs and asks 30 questions; Python asks them through a
    # pipeline over the index the CLI kept.
    kept = tmp_path / "index"
    cli = json.loads(run_cli(lector_bin, "eval", "odqa", "--squad", str(SAMPLE), "--index", str(kept),
                             "--limit", "30", "--k", "3", "--json", "--by", "qtype,overlap",
                             "--html", str(tmp_path / "cli.html")))
    ours = lector.eval.odqa(lector.Pipeline(lector.Index(kept)), SAMPLE, limit=30, k=3, per_question=True,
                            by=("qtype", "overlap"), html=tmp_path / "ours.html")
    assert (tmp_path / "ours.html").read_text() == (tmp_path / "cli.html").read_text()
    assert sum(g["questions"] for g in ours["breakdowns"]["qtype"]) == 30
    timings = {"seconds", "mean_timings_ms"}
    assert {key for key in cli if key not in timings} <= set(ours)
    for key in cli:
        if key not in timings:
            assert ours[key] == cli[key], key
    assert ours["questions"] == 30 and ours["k"] == 3
    assert len(ours["per_question"]) == 30
    with pytest.raises(ValueError, match="k must be between"):
        lector.eval.odqa(lector.Pipeline(lector.Index(kept)), SAMPLE, k=0)

    # k = 1 against k = 3 on the same questions: Python's paired test equals `lector eval compare`'s.
    one = lector.eval.odqa(lector.Pipeline(lector.Index(kept)), SAMPLE, limit=30, k=1, per_question=True)
    files = []
    for name, rows in (("k1", one["per_question"]), ("k3", ours["per_question"])):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        files.append(str(path))
    cli = json.loads(run_cli(lector_bin, "eval", "compare", *files, "--metric", "f1", "--trials", "2000", "--json"))
    assert lector.eval.compare(one["per_question"], ours["per_question"], trials=2000) == cli
    assert lector.eval.compare(*files, trials=2000) == cli
    with pytest.raises(ValueError, match="different questions"):
        lector.eval.compare(one["per_question"][:10], ours["per_question"], trials=10)


def test_eval_adversarial_gives_the_clis_numbers(lector_bin, tmp_path):
    args = ["--limit", "6", "--kind", "addsent,addany", "--position", "end", "--candidates", "2"]
    records = tmp_path / "records.jsonl"
    cli = json.loads(run_cli(lector_bin, "eval", "adversarial", str(SAMPLE), *args, "--json",
                             "--per-question", str(records), "--html", str(tmp_path / "cli.html")))
    ours = lector.eval.adversarial(lector.Reader(), SAMPLE, limit=6, kinds=["addsent", "addany"],
                                   positions=["end"], candidates=2, per_question=True, html=tmp_path / "ours.html")
    assert (tmp_path / "ours.html").read_text() == (tmp_path / "cli.html").read_text()
    assert ours.pop("per_question") == [json.loads(line) for line in records.read_text().splitlines()]
    cli.pop("seconds"), ours.pop("seconds")
    assert ours == cli
    assert [v["kind"] for v in ours["variants"]] == ["addsent", "addany"]
    with pytest.raises(ValueError, match="unknown position `middle`"):
        lector.eval.adversarial(lector.Reader(), SAMPLE, positions=["middle"])


def test_equivalence_and_tfidf_from_python(lector_bin, tmp_path):
    labels = [json.loads(line) for line in
              (SAMPLE.parent.parent / "bench" / "equivalence" / "squad-smollm2-labels.jsonl").read_text().splitlines()]
    ours = lector.eval.equivalence(labels)
    per_item = tmp_path / "per-item.jsonl"
    cli = json.loads(run_cli(lector_bin, "eval", "equivalence",
                             str(SAMPLE.parent.parent / "bench" / "equivalence" / "squad-smollm2-labels.jsonl"), "--json",
                             "--per-item", str(per_item)))
    assert ours.pop("per_item") == [json.loads(line) for line in per_item.read_text().splitlines()]
    assert ours == cli and cli["items"] == len(labels)
    one = lector.eval.equivalence([{"answer": "twenty-one", "golds": ["21"]}])["per_item"][0]
    assert one["equivalent"] and not one["exact_match"]
    with pytest.raises(ValueError, match="items"):
        lector.eval.equivalence([{"golds": ["21"]}])

    # An index made with n-grams answers TF-IDF searches, ranked as the CLI ranks them.
    index = lector.Index(tmp_path / "tfidf", tfidf=True)
    index.add(paths=[str(SAMPLE)])
    hits = index.search("Super Bowl halftime show", k=3, mode="tfidf")
    cli = json.loads(run_cli(lector_bin, "search", "Super Bowl halftime show", "--index", str(tmp_path / "tfidf"),
                             "--mode", "tfidf", "--k", "3", "--json"))
    assert [h.doc_id for h in hits] == [h["doc_id"] for h in cli["hits"]]


def test_eval_generative_with_a_prompt_and_examples_gives_the_clis_numbers(lector_bin, tmp_path):
    # Three questions of the sample, the shipped generator, chain of thought with one fixed
    # example: the Python report and rows equal the CLI's (greedy decoding: the same text).
    examples = tmp_path / "examples.jsonl"
    examples.write_text(json.dumps({
        "question": "Who won Super Bowl XLIX?", "answer": "New England Patriots",
        "context": "The New England Patriots beat the Seattle Seahawks in Super Bowl XLIX.",
        "reasoning": "The passage says the Patriots beat the Seahawks.",
    }) + "\n")
    rows = tmp_path / "rows.jsonl"
    cli = json.loads(run_cli(
        lector_bin, "eval", "generative", "--squad", str(SAMPLE), "--limit", "3",
        "--prompt", "chain-of-thought", "--examples", str(examples), "--shots", "1",
        "--per-question", str(rows), "--json",
    ))
    ours = lector.eval.generative(SAMPLE, limit=3, prompt="chain-of-thought", examples=examples, shots=1,
                                  reader=True, per_question=True)
    timings = ("seconds", "generated_tokens_per_second", "timings")
    untimed = lambda v: ({k: untimed(x) for k, x in v.items() if k not in timings} if isinstance(v, dict)
                         else [untimed(x) for x in v] if isinstance(v, list) else v)
    cli_rows = [json.loads(line) for line in rows.read_text().splitlines()]
    assert untimed(ours.pop("per_question")) == untimed(cli_rows)
    assert untimed(ours) == untimed(cli) and ours["extractive"]["exact_match"] >= 0
    assert (ours["questions"], ours["mode"], ours["prompt"]) == (3, "open_book", "chain-of-thought")
    ours = lector.eval.generative(SAMPLE, limit=3, prompt="chain-of-thought", examples=examples, shots=1,
                                  per_question=True)
    assert ours["extractive"] is None
    assert all("reasoning" in r for r in ours["per_question"])
    with pytest.raises(lector.LectorError, match="unknown variable `qestion`"):
        bad = tmp_path / "bad.toml"
        bad.write_text('[closed_book]\nsystem = "s"\nuser = "{{ qestion }}"\n')
        lector.eval.generative(SAMPLE, limit=1, prompt=bad)
    with pytest.raises(ValueError, match="closed_book"):
        lector.eval.generative(SAMPLE, squad=False)


def test_generate_questions_gives_the_clis_set(lector_bin, odqa, tmp_path):
    # The same index, reader and retrieval: the same questions as `lector generate-questions`.
    pipeline = lector.Pipeline(lector.Index(odqa["index"]))
    ours = lector.generate_questions(pipeline, k=3)
    out = tmp_path / "set.json"
    report = json.loads(run_cli(lector_bin, "generate-questions", "--index", odqa["index"], "--out", str(out),
                                "--k", "3", "--json"))
    assert ours["report"] == report
    assert ours["squad"] == json.loads(out.read_text())
    assert report["kept"] > 0
    with pytest.raises(ValueError, match="min_f1"):
        lector.generate_questions(pipeline, min_f1=2.0)


def test_bertscore_equals_the_cli_and_the_package(lector_bin, tmp_path):
    """`lector.eval.bertscore` gives `lector eval bertscore --json`'s numbers, and every item's
    scores equal the `bert-score` package's recorded run (tiny BERT, layer 2, idf, baseline)."""
    fixtures = REPO / "crates" / "lector-cli" / "tests" / "fixtures" / "bertscore"
    model = REPO / "crates" / "lector-models" / "tests" / "fixtures" / "tiny-bert"
    reference = json.loads((fixtures / "tiny-bert-L2-idf-baseline.json").read_text())
    items = [json.loads(line) for line in (fixtures / "items.jsonl").read_text().splitlines() if line.strip()]
    baseline = fixtures / reference["baseline"]
    report = lector.eval.bertscore(items, model, layer=2, idf=True, baseline=baseline, per_item=True)
    cli = json.loads(run_cli(
        lector_bin, "eval", "bertscore", str(fixtures / "items.jsonl"), "--model", str(model), "--layer", "2",
        "--idf", "--baseline", str(baseline), "--json",
    ))
    assert {k: v for k, v in report.items() if k != "per_item"} == cli
    for ours, theirs in zip(report["per_item"], reference["scores"]):
        assert ours["id"] == theirs["id"]
        for metric in ("precision", "recall", "f1"):
            assert ours[metric] == pytest.approx(theirs[metric], abs=1e-5), (ours["id"], metric)
    with pytest.raises(ValueError, match=r"items\[0\]"):
        lector.eval.bertscore([{"candidate": "x"}], model)


def test_judge_equals_the_cli(lector_bin, tmp_path):
    """`lector.eval.judge` gives `lector eval judge --json`'s report on the same items, with the
    registry's SmolLM2-135M-Instruct as the judge (greedy, no cache)."""
    items = [
        {"id": "a", "question": "Which team won Super Bowl 50?", "references": ["Denver Broncos"],
         "answer": "The Denver Broncos won.", "label": "correct"},
        {"id": "b", "question": "Where was Super Bowl 50 played?", "references": ["Levi's Stadium"],
         "answer": "Miami.", "label": "incorrect"},
    ]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    cli = json.loads(run_cli(lector_bin, "eval", "judge", str(path), "--no-cache", "--json"))
    ours = lector.eval.judge(items, per_item=True)
    strip = lambda report: {k: v for k, v in report.items() if k not in ("seconds", "per_item")}
    assert strip(ours) == strip(cli)
    assert [row["id"] for row in ours["per_item"]] == ["a", "b"] and ours["items"] == 2
    with pytest.raises(ValueError, match=r"items\[0\].*answer"):
        lector.eval.judge([{"question": "q", "references": ["r"]}])


def test_judged_equivalence_equals_the_cli(lector_bin, tmp_path):
    """A judge model's equivalence verdicts (both orders) from Python equal `eval equivalence
    --judge-model`'s, with the registry's SmolLM2-135M-Instruct."""
    models = json.loads(run_cli(lector_bin, "models", "list", "--json"))
    directory = Path(next(m["path"] for m in models if m["role"] == "generator"))
    gguf = next(directory.glob("*.gguf"))
    items = [
        {"id": "a", "question": "Which team won Super Bowl 50?", "answer": "the Broncos", "golds": ["Denver Broncos"], "label": True},
        {"id": "b", "question": "Where was Super Bowl 50 played?", "answer": "Miami", "golds": ["Levi's Stadium"], "label": False},
        {"id": "c", "question": "How many points?", "answer": "", "golds": ["24"]},
    ]
    path, per_item = tmp_path / "items.jsonl", tmp_path / "per-item.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    cli = json.loads(run_cli(lector_bin, "eval", "equivalence", str(path), "--judge-model", str(gguf), "--json",
                             "--per-item", str(per_item)))
    ours = lector.eval.equivalence(items, judge_model=gguf)
    assert ours.pop("per_item") == [json.loads(line) for line in per_item.read_text().splitlines()]
    assert ours == cli and cli["judge_equivalence"]["questions"] == 3
    assert [a["verdict"] for a in ours["agreement"]][-1] == "judge_equivalent"


def test_faithfulness_equals_the_cli(lector_bin, tmp_path):
    """`lector.eval.faithfulness` gives `lector eval faithfulness --json`'s report on a slice of
    the committed claim set, without and with SmolLM2-135M as the judge."""
    lines = (REPO / "bench" / "data" / "faithfulness-squad.jsonl").read_text().splitlines()[:60]
    items = [json.loads(line) for line in lines]
    path = tmp_path / "claims.jsonl"
    path.write_text("\n".join(lines) + "\n")
    cli = json.loads(run_cli(lector_bin, "eval", "faithfulness", str(path), "--json"))
    ours = lector.eval.faithfulness(items, per_claim=True)
    assert {k: v for k, v in ours.items() if k != "per_claim"} == cli
    assert [c["id"] for c in ours["per_claim"]] == [i["id"] for i in items]
    assert "judge" not in ours["checkers"]

    few = tmp_path / "few.jsonl"
    few.write_text("\n".join(lines[:4]) + "\n")
    cli = json.loads(run_cli(lector_bin, "eval", "faithfulness", str(few), "--judge", "--json"))
    ours = lector.eval.faithfulness(items[:4], judge=True)
    assert ours == cli and ours["checkers"]["judge"]["model"]


def test_canary_equals_the_cli(lector_bin, odqa, tmp_path):
    """`lector.eval.canary` writes the baseline `lector eval canary` compares with, and its
    comparison equals the CLI's (quiet on an unchanged index)."""
    questions = tmp_path / "questions.json"
    data = json.loads(SAMPLE.read_text())
    data["data"][0]["paragraphs"] = data["data"][0]["paragraphs"][:3]  # ~30 questions: a slice
    questions.write_text(json.dumps(data))
    pipeline = lector.Pipeline(lector.Index(odqa["index"]))
    written = lector.eval.canary(pipeline, questions, write_baseline=True)
    assert written["baseline_file"] == str(tmp_path / "questions.baseline.json")
    cli = json.loads(run_cli(lector_bin, "eval", "canary", "--questions", str(questions), "--index", odqa["index"], "--json"))
    ours = lector.eval.canary(pipeline, questions)
    strip = lambda report: {k: v for k, v in report.items() if k != "seconds"}
    assert strip(ours) == strip(cli) and ours["alarm"] is False and ours["changed"] == 0
    assert ours["current"] == written["scores"]
    with pytest.raises(lector.LectorError, match="baseline"):
        lector.eval.canary(pipeline, questions, baseline=tmp_path / "missing.json")


def test_rouge_equals_the_cli(lector_bin, sample, tmp_path):
    """`lector.eval.rouge` gives `lector eval rouge --json`'s intervals on the sample's questions
    (each question's text as a prediction against its gold answers), with and without stemming."""
    items = [
        {"id": qa["id"], "prediction": qa["question"], "references": [a["text"] for a in qa["answers"]]}
        for p in sample["data"][0]["paragraphs"][:4] for qa in p["qas"]
    ]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    for stem in (False, True):
        flags = ["--stem"] if stem else []
        cli = json.loads(run_cli(lector_bin, "eval", "rouge", str(path), *flags, "--json",
                                 "--html", str(tmp_path / "cli.html")))
        ours = lector.eval.rouge(items, stem=stem, per_item=True, html=tmp_path / "ours.html")
        assert {k: v for k, v in ours.items() if k != "per_item"} == cli
        # The same page but for its title, which names the file the CLI read.
        page = (tmp_path / "ours.html").read_text().replace("&lt;items&gt;", str(path))
        assert page == (tmp_path / "cli.html").read_text()
        assert [row["id"] for row in ours["per_item"]] == [i["id"] for i in items]
    with pytest.raises(ValueError, match=r"items\[0\].*no references"):
        lector.eval.rouge([{"id": "x", "prediction": "a", "references": []}])


def test_eval_retrieval_run_gives_the_clis_numbers(lector_bin, tmp_path):
    """An index's own retrieval scored from Python equals `lector eval retrieval --index`: BEIR
    SciFact against its qrels (BM25), and answer containment on the bundled sample."""
    corpus = lector.eval.shared_data("beir/scifact/corpus.jsonl")
    queries = lector.eval.shared_data("beir/scifact/queries.jsonl")
    qrels = lector.eval.shared_data("beir/scifact/qrels/test.tsv")
    index = lector.Index(tmp_path / "scifact")
    index.add(paths=[corpus])
    per_query = tmp_path / "per-query.jsonl"
    cli = json.loads(run_cli(lector_bin, "eval", "retrieval", "--index", str(tmp_path / "scifact"),
                             "--queries", queries, "--qrels", qrels, "--k", "10,100", "--resamples", "200",
                             "--json", "--per-query", str(per_query), "--html", str(tmp_path / "cli.html")))
    ours = lector.eval.retrieval_run(index, queries, qrels=qrels, ks=[10, 100], resamples=200, per_query=True,
                                     html=tmp_path / "ours.html")
    assert ours.pop("per_query") == [json.loads(line) for line in per_query.read_text().splitlines()]
    assert ours == cli and ours["ndcg@10"]["mean"] >= 0.665
    assert (tmp_path / "ours.html").read_text() == (tmp_path / "cli.html").read_text()

    sample = lector.Index(tmp_path / "sample")
    sample.add(paths=[str(SAMPLE)])
    cli = json.loads(run_cli(lector_bin, "eval", "retrieval", "--index", str(tmp_path / "sample"),
                             "--queries", str(SAMPLE), "--max-k", "20", "--json"))
    ours = lector.eval.retrieval_run(sample, SAMPLE, max_k=20)
    assert ours == cli and ours["questions"] == 216
    with pytest.raises(ValueError, match="depth and max_k"):
        lector.eval.retrieval_run(sample, SAMPLE, max_k=0)
