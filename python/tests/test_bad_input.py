"""The Python package under bad input: what a user can pass by mistake is refused with a message
naming the argument, never taken apart character by character, never a crash of the interpreter
or a panic, and an interrupt stops a long add without committing the rest."""

import _thread
import json
import math
import threading

import pytest

import lector

#: Documents in the interrupted adds: several seconds of work, interrupted after half a second.
MANY = 200_000


def nested(levels: int):
    value = "leaf"
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.fixture(scope="module")
def many_documents():
    return [{"id": f"d{i}", "text": f"document number {i} about tea, naps and walks"} for i in range(MANY)]


@pytest.fixture()
def index(tmp_path):
    index = lector.Index(tmp_path / "ix")
    index.add([{"id": "a", "text": "Alpha is the first letter."}, {"id": "abc", "text": "Abc is a song."}])
    return index


def test_a_string_is_one_path_or_one_id_never_its_characters(index, tmp_path, monkeypatch):
    # The current directory holds other files: a path taken apart into its characters would
    # walk `.`-less names from here, or the whole directory.
    folder = tmp_path / "cwd"
    folder.mkdir()
    (folder / "other.txt").write_text("Another file that must not be indexed.")
    (folder / "t").write_text("A file named like one character of the path.")
    one = folder / "one.txt"
    one.write_text("Only this file is indexed.")
    monkeypatch.chdir(folder)
    counts = index.add(paths=str(one))
    assert (counts["added"], counts["documents"]) == (1, 3)
    assert index.add(paths=one)["unchanged"] == 1

    assert index.delete("abc") == 1
    assert [h.doc_id for h in index.search("Alpha first letter")] == ["a"]
    with pytest.raises(TypeError, match="ids\\[0\\] must be a str"):
        index.delete([1])
    with pytest.raises(TypeError, match="documents must be a list"):
        index.add("one.txt")
    with pytest.raises(TypeError, match="questions must be a list of str"):
        lector.Pipeline(index).ask_many("Which letter?")


def test_cyclic_and_deep_values_are_refused_by_name_without_crashing(index):
    cyclic = {"name": "loop"}
    cyclic["self"] = cyclic
    with pytest.raises(ValueError, match=r"documents\[1\]: nested more than 100 levels deep \(or cyclic\)"):
        index.add([{"id": "fine", "text": "Fine."}, {"id": "c", "text": "Cyclic.", "metadata": cyclic}])
    loop = {"operator": "AND", "conditions": []}
    loop["conditions"].append(loop)
    with pytest.raises(ValueError, match="filter: nested more than 100 levels"):
        index.search("Alpha", filter=loop)
    with pytest.raises(ValueError, match=r"documents\[0\]: nested more than 100"):
        index.add([{"id": "deep", "text": "Deep.", "metadata": nested(50_000)}])
    assert index.stats()["documents"] == 2

    # The CLI's limit, one for every face: 100 levels are kept and read back whole (filters
    # match them), 101 are refused naming the document.
    index.add([{"id": "deep", "text": "Deep metadata here.", "metadata": {"top": 1, "tree": nested(99)}}])
    hit = index.search("deep metadata", k=1)[0]
    assert hit.metadata == {"top": 1, "tree": nested(99)}
    assert [h.doc_id for h in index.search("deep metadata", filter="top == 1")] == ["deep"]
    for levels in (101, 126):
        with pytest.raises(ValueError, match=r"documents\[0\]: .*(`deep2`: `metadata` nests deeper than 100|nested more than 100)"):
            index.add([{"id": "deep2", "text": "Deeper.", "metadata": nested(levels)}])


def test_the_cli_refuses_what_python_refuses(lector_bin, tmp_path):
    import subprocess

    lines = tmp_path / "docs.jsonl"
    lines.write_text(
        json.dumps({"id": "deep", "text": "Deep.", "metadata": nested(101)}) + "\n"
        + json.dumps({"id": "empty", "text": "   "}) + "\n"
    )
    done = subprocess.run(
        [str(lector_bin), "index", "add", str(lines), "--index", str(tmp_path / "ix"), "--strict"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode != 0
    assert "docs.jsonl:1: document `deep`: `metadata` nests deeper than 100 levels" in done.stderr
    with pytest.raises(ValueError, match="document `empty` has no text"):
        lector.Index(tmp_path / "py").add([{"id": "empty", "text": "   "}])


def test_options_out_of_bounds_are_value_errors_never_panics(index):
    pipeline = lector.Pipeline(index)
    for options, says in [
        ({"k": -1}, "k must be a positive integer, not -1"),
        ({"k": 2**62}, "k must be between 1 and 1000"),
        ({"answers_per_passage": 2**62}, "answers_per_passage must be between 1 and 20"),
        ({"rank_prior": math.nan}, "rank_prior must be between 0 and 8, not NaN"),
        ({"ambiguity_odds": 0.5}, "ambiguity_odds must be at least 1"),
        ({"vote": "yes"}, "vote must be True or False"),
    ]:
        try:
            pipeline.ask("Which letter?", **options)
        except Exception as err:  # a PanicException would not be caught here
            assert isinstance(err, ValueError) and says in str(err), (options, err)
        else:
            pytest.fail(f"{options} was accepted")
    reader = lector.Reader()
    for params, says in [({"top_k": 2**62}, "top_k must be between 1 and 1000"), ({"batch_size": 2**40}, "batch_size")]:
        with pytest.raises(ValueError, match=says):
            reader.read("Which letter?", "Alpha is the first letter.", **params)


def test_messages_name_what_the_user_passed(index):
    reader = lector.Reader()
    with pytest.raises(TypeError, match="^question must be a str, not NoneType$"):
        reader.read(None, "Alpha is the first letter.")
    with pytest.raises(TypeError, match=r"pairs\[0\] context must be a str"):
        reader.read_batch([("Which?", 3)])
    with pytest.raises(TypeError, match="^index must be a lector.Index, not str$"):
        lector.Pipeline(str(index.path))
    bad = {"operator": "AND", "conditions": [{"field": "year", "operator": "~", "value": 1}]}
    with pytest.raises(ValueError, match=r"^filter.conditions\[0\].operator: unknown operator"):
        index.search("Alpha", filter=bad)
    with pytest.raises(ValueError, match="^filter: expected a value .* at column 7"):
        index.search("Alpha", filter="year >> 1")


def interrupt_after(seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, _thread.interrupt_main)
    timer.start()
    return timer


def test_ctrl_c_stops_an_add_of_documents_without_committing_it(index, many_documents):
    interrupt_after(0.5)
    with pytest.raises(KeyboardInterrupt, match="nothing of this add was committed; the index keeps its last commit, 2 documents"):
        index.add(many_documents)
    assert index.stats()["documents"] == 2
    index.reload()
    assert index.stats()["documents"] == 2


def test_ctrl_c_stops_an_add_of_files_after_its_last_batch_commit(index, many_documents, tmp_path):
    lines = tmp_path / "many.jsonl"
    lines.write_text("".join(json.dumps(d) + "\n" for d in many_documents))
    interrupt_after(0.5)
    with pytest.raises(KeyboardInterrupt, match=r"the index keeps its last commit, (\d+) documents") as stopped:
        index.add(paths=lines)
    kept = int(stopped.value.args[0].split("last commit, ")[1].split(" ")[0])
    # Batches of 10,000 documents are committed as they fill; the rest is not.
    assert kept < MANY + 2 and (kept - 2) % 10_000 == 0
    assert index.stats()["documents"] == kept


def test_opening_an_index_releases_the_gil(index, many_documents):
    index.add(many_documents)
    worker = threading.Thread(target=lambda: [lector.Index(index.path) for _ in range(5)])
    ticks = 0
    worker.start()
    while worker.is_alive():
        ticks += 1
    worker.join()
    assert ticks > 10_000
