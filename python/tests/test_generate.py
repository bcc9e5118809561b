"""Generated answers from Python (`Pipeline.generate` / `stream`) equal `lector ask --generate`'s
with the same seed, on the bundled sample's index and the registry's SmolLM2-135M-Instruct."""

import json

import pytest

import lector

from conftest import run_cli

QUESTION = "Which NFL team represented the AFC at Super Bowl 50?"


def without_timings(answer: dict) -> dict:
    answer = json.loads(json.dumps(answer))
    answer.pop("timings", None)
    answer["generation"].pop("timings", None)
    return answer


def test_a_generated_answer_equals_the_clis_with_the_same_seed(lector_bin, odqa):
    cli = json.loads(run_cli(
        lector_bin, "ask", QUESTION, "--index", odqa["index"], "--generate", "--json",
        "--temperature", "0.8", "--seed", "7", "--max-new-tokens", "40",
    ))
    pipeline = lector.Pipeline(lector.Index(odqa["index"]))
    pieces = []
    answer = pipeline.generate(QUESTION, temperature=0.8, seed=7, max_new_tokens=40, on_token=pieces.append)
    assert without_timings(answer.raw) == without_timings(cli)
    assert answer.text == cli["text"] and answer.generator == cli["generator"]
    assert pieces and "".join(pieces).strip() == cli["generation"]["text"].strip()
    assert [c["doc_id"] for c in answer.citations] == [c["doc_id"] for c in cli["answer"]["citations"]]

    # Streamed: the same pieces, then the same answer as the iterator's return value.
    stream = pipeline.stream(QUESTION, temperature=0.8, seed=7, max_new_tokens=40)
    streamed = []
    while True:
        try:
            streamed.append(next(stream))
        except StopIteration as done:
            assert without_timings(done.value.raw) == without_timings(cli)
            break
    assert streamed == pieces


def test_a_callback_that_raises_stops_the_generation(odqa):
    pipeline = lector.Pipeline(lector.Index(odqa["index"]))

    def stop(piece: str) -> None:
        raise KeyboardInterrupt("enough")

    with pytest.raises(KeyboardInterrupt, match="enough"):
        pipeline.generate(QUESTION, on_token=stop)
    with pytest.raises(ValueError, match="api_model"):
        pipeline.generate(QUESTION, endpoint="http://127.0.0.1:9/v1")
    closed = pipeline.generate(QUESTION, closed_book=True, max_new_tokens=8)
    assert closed.raw["prompt"] is None and closed.citations == []


def squad_v2_slice(path) -> str:
    """SQuAD v2.0 dev's first three paragraphs of its first article and the first of its second,
    each with its first answerable and first unanswerable question (as the CLI's RAG test)."""
    data = json.loads(open(lector.eval.shared_data("squad/dev-v2.0.json")).read())
    data["data"] = data["data"][:2]
    for article, keep in zip(data["data"], (3, 1)):
        article["paragraphs"] = article["paragraphs"][:keep]
        for paragraph in article["paragraphs"]:
            qas = paragraph["qas"]
            paragraph["qas"] = [next(q for q in qas if not q["is_impossible"]),
                                next(q for q in qas if q["is_impossible"])]
    path.write_text(json.dumps(data))
    return str(path)


def timeless(value):
    """`value` without its timings (seconds, tokens/s, per-answer timing fields)."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items()
                if k not in ("seconds", "generated_tokens_per_second", "timings")}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def test_eval_rag_gives_the_clis_numbers(lector_bin, tmp_path):
    data = squad_v2_slice(tmp_path / "slice-v2.json")
    rows = tmp_path / "rows.jsonl"
    cli = json.loads(run_cli(
        lector_bin, "eval", "generative", "--squad", data, "--retrieve", "--k", "3", "--order", "rank",
        "--withhold-every", "2", "--max-new-tokens", "16", "--resamples", "200", "--json",
        "--per-question", str(rows), "--index", str(tmp_path / "cli-index"),
    ))
    cli_rows = [json.loads(line) for line in rows.read_text().splitlines()]
    ours = lector.eval.rag(data, k=3, order="rank", withhold_every=2, max_new_tokens=16, resamples=200,
                           per_question=True)
    assert timeless(ours.pop("per_question")) == timeless(cli_rows)
    assert timeless(ours) == timeless(cli)
    assert ours["questions"] == 8 and ours["withheld"] > 0 and ours["order"] == "rank"
    assert set(ours["figures"]) >= {"exact_match", "f1", "claims_supported", "refusal_rate_unanswerable"}
    # Its records feed a paired comparison like the CLI's.
    same = lector.eval.compare(cli_rows, [dict(r) for r in cli_rows], metric="f1", trials=100)
    assert same["difference"]["mean"] == 0.0

    with pytest.raises(ValueError, match="passage order"):
        lector.eval.rag(data, order="middle")
    with pytest.raises(ValueError, match="k must be at least 1"):
        lector.eval.rag(data, k=0)
    with pytest.raises(ValueError, match="judge"):
        lector.eval.rag(data, judge_claims=True, limit=1, max_new_tokens=4)
