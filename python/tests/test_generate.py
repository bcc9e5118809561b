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
