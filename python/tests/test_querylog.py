"""The query log from Python: a real `lector serve --log-queries` (loopback, stopped by its pid)
answers two questions, takes feedback and two labels; `lector.querylog` reads the asks, the
feedback and the labels, and exports them as `lector label export` does."""

import contextlib
import json
import subprocess
import threading
import urllib.request

import pytest

import lector
import lector.querylog

from conftest import SAMPLE, run_cli


def post(addr: str, path: str, body: dict):
    request = urllib.request.Request(
        f"http://{addr}{path}", data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return reply.status, reply.headers.get("x-request-id"), json.loads(reply.read() or b"null")


@contextlib.contextmanager
def logging_server(lector_bin, index_dir, log):
    """A real `lector serve --log-queries` on a loopback port of its choosing; yields its address
    and stops it by the pid this test started."""
    server = subprocess.Popen(
        [str(lector_bin), "serve", "--addr", "127.0.0.1:0", "--index", str(index_dir), "--log-queries", str(log)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        addr = server.stdout.readline().split("http://")[1].split("/")[0]
        threading.Thread(target=server.stdout.read, daemon=True).start()  # keep the pipe drained
        yield addr
    finally:
        server.terminate()  # by the pid this test started
        server.wait(timeout=60)


def test_the_log_feedback_and_labels_from_python(lector_bin, tmp_path, sample):
    index = lector.Index(str(tmp_path / "index"))
    index.add(paths=[str(SAMPLE)])
    log = tmp_path / "log"
    with logging_server(lector_bin, tmp_path / "index", log) as addr:
        questions = [qa["question"] for qa in sample["data"][0]["paragraphs"][0]["qas"][:2]]
        asked = [post(addr, "/v1/ask", {"question": q}) for q in questions]
        ids = [request_id for _, request_id, _ in asked]
        assert all(status == 200 for status, _, _ in asked) and all(ids)
        assert post(addr, "/v1/feedback", {"request_id": ids[0], "verdict": "down", "correct_answer": "Denver Broncos"})[0] == 202
        evidence = asked[0][2]["answer"]["evidence"]
        document = next(d for d in index.documents() if d.id == evidence["doc_id"])
        gold = "Denver Broncos"
        start = document.text.index(gold)
        assert post(addr, "/v1/labels", {"request_id": ids[0], "verdict": "answer", "doc_id": document.id,
                                         "start": start, "end": start + len(gold), "text": gold})[0] == 201
        assert post(addr, "/v1/labels", {"request_id": ids[1], "verdict": "skip"})[0] == 201

    entries = lector.querylog.entries(log)
    asks = [e for e in entries if e["type"] == "ask"]
    assert [a["question"] for a in asks] == questions and [a["request_id"] for a in asks] == ids
    feedback = [e for e in entries if e["type"] == "feedback"]
    assert len(feedback) == 1 and feedback[0]["verdict"] == "down" and feedback[0]["request_id"] == ids[0]
    labels = lector.querylog.labels(log)
    assert [(l["request_id"], l["verdict"]) for l in labels] == [(ids[0], "answer"), (ids[1], "skip")]

    exported = lector.querylog.export(log, index)
    out = tmp_path / "labels.json"
    cli = json.loads(run_cli(lector_bin, "label", "export", "--log", str(log), "--index", str(tmp_path / "index"),
                             "--out", str(out), "--json"))
    assert exported["squad"] == json.loads(out.read_text())
    assert {k: exported[k] for k in ("answers", "unanswerable", "skipped", "left_out")} == \
        {k: cli[k] for k in ("answers", "unanswerable", "skipped", "left_out")}
    assert (exported["answers"], exported["skipped"]) == (1, 1)


def test_drift_equals_lector_report_drift(lector_bin, tmp_path, sample):
    import datetime
    import time

    index = lector.Index(str(tmp_path / "index"))
    index.add(paths=[str(SAMPLE)])
    log = tmp_path / "log"
    on_topic = [qa["question"] for p in sample["data"][0]["paragraphs"][:4] for qa in p["qas"]][:8]
    off_topic = [f"What do historians believe about the long-term consequences of {t} for villagers in the north?"
                 for t in ("glacier retreat", "coral bleaching", "volcanic soil", "bird migration",
                           "medieval poetry", "tax farming", "printing presses", "desert cacti")]
    with logging_server(lector_bin, tmp_path / "index", log) as addr:
        assert all(post(addr, "/v1/ask", {"question": q})[0] == 200 for q in on_topic)
        time.sleep(0.05)
        split = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        time.sleep(0.05)
        assert all(post(addr, "/v1/ask", {"question": q})[0] == 200 for q in off_topic)

    cli = json.loads(run_cli(lector_bin, "report", "drift", "--log", str(log), "--index", str(tmp_path / "index"),
                             "--split", split, "--json"))
    ours = lector.querylog.drift(log, index=tmp_path / "index", split=split, html=tmp_path / "drift.html")
    assert ours == cli
    assert ours["windows"]["before"]["asks"] == 8 and ours["windows"]["after"]["asks"] == 8
    assert "question_words" in ours["drifted"], ours["drifted"]
    assert "before and after" in (tmp_path / "drift.html").read_text()
    # The median split halves the same log.
    assert lector.querylog.drift(log)["windows"]["before"]["asks"] == 8

    with pytest.raises(ValueError, match="not a time"):
        lector.querylog.drift(log, split="yesterday")
    with pytest.raises(ValueError, match="alpha"):
        lector.querylog.drift(log, alpha=2.0)
    with pytest.raises(lector.LectorError, match="no query log files"):
        lector.querylog.drift(tmp_path)
