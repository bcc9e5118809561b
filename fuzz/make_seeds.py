#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: small slices of real files.

Usage: make_seeds.py DATA_DIR REPO OUT [GGUF]

DATA_DIR is the shared evaluation data (resolved by bench/fuzz.sh the way lector_eval::data does),
REPO the repository root, OUT the folder that gets one sub-folder of seeds per target. GGUF, when
given, is a real model whose metadata (arrays cut short) seeds the GGUF target; without it a
small hand-made header does. Every seed stays under a few kilobytes: libFuzzer mutates small
inputs fastest, and nothing here is committed.
"""

import io
import json
import zipfile
import zlib
import pathlib
import struct
import sys

# PDFs are written object by object as the benchmarks write them.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "bench"))
from pdf_objects import pdf_of  # noqa: E402


def write(out, target, name, data):
    folder = out / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def squad_slice(dataset, article=0, paragraphs=1, questions=2):
    """A valid SQuAD file holding the first paragraphs of one article, with few questions."""
    art = dataset["data"][article]
    kept = []
    for p in art["paragraphs"][:paragraphs]:
        kept.append({"context": p["context"], "qas": p["qas"][:questions]})
    return json.dumps({"version": dataset.get("version", "1.1"),
                       "data": [{"title": art["title"], "paragraphs": kept}]})


def head_lines(path, n, max_chars=1500):
    with open(path, encoding="utf-8") as f:
        return [line for _, line in zip(range(n), f) if len(line) <= max_chars]


def seeds_squad(data, repo, out):
    sample = json.loads((repo / "samples/squad-v1.1-sample.json").read_text())
    write(out, "ingest_squad", "sample", squad_slice(sample, paragraphs=2))
    for name in ["squad/dev-v1.1.json", "squad/dev-v2.0.json", "subjqa/books.train.squad2.json"]:
        dataset = json.loads((data / name).read_text())
        write(out, "ingest_squad", name.replace("/", "_"), squad_slice(dataset))
        write(out, "ingest_squad", name.replace("/", "_") + "-2", squad_slice(dataset, article=min(1, len(dataset["data"]) - 1), paragraphs=2))
    return sample


def seeds_jsonl(data, sample, out):
    corpus = head_lines(data / "beir/scifact/corpus.jsonl", 40)
    for i in range(0, 6, 2):
        write(out, "ingest_jsonl", f"beir-corpus-{i}", "".join(corpus[i:i + 2]))
    article = sample["data"][0]
    lines = [json.dumps({"id": f"{article['title']}#{i}", "title": article["title"],
                         "text": p["context"][:400], "date": "2016-06-16",
                         "metadata": {"source": "squad", "paragraph": i}})
             for i, p in enumerate(article["paragraphs"][:3])]
    write(out, "ingest_jsonl", "lector-records", "\n".join(lines) + "\n")
    write(out, "ingest_jsonl", "numeric-ids", '{"id": 7, "text": "x"}\n\n{"_id": 8, "text": "y"}')


def seeds_queries(data, out):
    write(out, "beir_queries", "scifact", "".join(head_lines(data / "beir/scifact/queries.jsonl", 8)))
    write(out, "beir_queries", "nq-open", "".join(head_lines(data / "nq_open/NQ-open.dev.jsonl", 8)))


def seeds_trec(data, out):
    qrels = head_lines(data / "beir/scifact/qrels/test.tsv", 12)
    judged = [line.split("\t") for line in qrels[1:]]
    run = []
    for rank, (qid, docid, _) in enumerate(judged):
        run.append(f"{qid} Q0 {docid} 1 {10 - rank * 0.5} bm25")
        run.append(f"{qid} Q0 {int(docid) + 1} 2 {9.25 - rank * 0.5} bm25")
    trec_qrels = "".join(f"{q} 0 {d} {r}" for q, d, r in judged)
    write(out, "trec", "beir-qrels", "\n".join(run) + "\n\0" + "".join(qrels))
    write(out, "trec", "trec-qrels", "\n".join(run[:8]) + "\n\0" + trec_qrels)
    write(out, "trec", "ties", "q1 Q0 b 1 1.0 t\nq1 Q0 aa 2 1 t\nq1 Q0 c 3 -0 t\0q1 0 aa 2\nq1 0 c 0\n")


def seeds_server(sample, out):
    p = sample["data"][0]["paragraphs"][0]
    question = p["qas"][0]["question"]
    doc = {"id": "doc-1", "title": sample["data"][0]["title"], "text": p["context"][:500],
           "date": "2016-06-16", "metadata": {"lang": "en"}}
    bodies = {
        "ask": {"question": question, "k": 5},
        "ask-all": {"question": question, "k": 3, "mode": "generative", "retrieval": "hybrid",
                    "vote": True, "prefer_recent": True, "rank_prior": 1.5,
                    "answers_per_passage": 2, "probabilities": False, "stream": True,
                    "max_tokens": 32, "temperature": 0.7, "top_p": 0.9, "seed": 42},
        "document": doc,
        "documents": [doc, {"id": "doc-2", "text": "Second."}],
        "chat": {"model": "lector", "messages": [{"role": "system", "content": "Be brief."},
                                                  {"role": "user", "content": question}],
                 "max_tokens": 16, "temperature": 0.5, "top_p": 0.95, "seed": 1,
                 "stop": ["\n"], "stream": False, "n": 1},
        "chat-parts": {"messages": [{"role": "user", "content": [{"type": "text", "text": question}]}],
                       "max_completion_tokens": 8, "stop": "."},
    }
    for name, body in bodies.items():
        write(out, "server_bodies", name, json.dumps(body))


def seeds_html(repo, sample, out):
    write(out, "ingest_html", "index", (repo / "crates/lector-server/assets/index.html").read_bytes()[:6000])
    article = sample["data"][0]
    body = "".join(f"<p>{p['context'][:300]}</p>\n" for p in article["paragraphs"][:2])
    write(out, "ingest_html", "page", f"<!DOCTYPE html><html><head><title>{article['title']}</title>"
          f"<style>p {{color: red}}</style><script>var x = '<p>';</script></head><body>{body}</body></html>")
    write(out, "ingest_html", "no-head", f"<title>{article['title']} &amp; more</title><h1>Caf&eacute;"
          f"&hellip;</h1><p>5 &lt; 6 &#x27;quoted&#39; &notin; &NotAnEntity;<br>{body}")


def seeds_docx(repo, out):
    fixtures = repo / "crates/lector-ingest/tests/fixtures"
    for name in ["manual.docx", "word-style.docx"]:
        write(out, "ingest_docx", name.removesuffix(".docx"), (fixtures / name).read_bytes())
    # Hostile shapes, as crates/lector-ingest/tests/hostile/files.rs makes them at full size:
    # a million unclosed paragraphs, and a paragraph nested in 300 tables.
    head = ('<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
            'wordprocessingml/2006/main"><w:body>')
    write(out, "ingest_docx", "unclosed", docx_of(head + "<w:p>" * 1_000_000))
    tables = "<w:tbl><w:tr><w:tc>" * 300 + "<w:p><w:r><w:t>deep</w:t></w:r></w:p>" + "</w:tc></w:tr></w:tbl>" * 300
    write(out, "ingest_docx", "nested-tables", docx_of(head + tables + "</w:body></w:document>"))


def docx_of(document_xml):
    """A .docx holding only its main part."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("word/document.xml", document_xml)
    return buffer.getvalue()


def seeds_pdf(data, out):
    """The real sample PDFs of up to 4 MiB (libFuzzer's input limit for this target), text and
    image-only alike, and hostile shapes: pages sharing one stream, a long outline on a long page."""
    for path in sorted((data / "pdf-samples").glob("*/*.pdf")):
        if path.stat().st_size <= 4 << 20:
            write(out, "ingest_pdf", path.stem, path.read_bytes())
    lines = b" ".join(b"(Line %d of the page.) '" % i for i in range(8))
    content = b"BT /F1 12 Tf 14 TL 72 720 Td " + lines + b" ET\n" + (b" " * 1023 + b"\n") * 4096
    shared = zlib.compress(content, 9)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", None,
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(shared) + shared + b"\nendstream"]
    kids = []
    for _ in range(50):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       b"/Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>")
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    write(out, "ingest_pdf", "shared-stream", pdf_of(objects))
    page = zlib.compress(b"BT /F1 12 Tf 72 720 Td (" + b"a " * 500_000 + b") Tj ET\n", 9)
    objects = [b"<< /Type /Catalog /Pages 2 0 R /Outlines 3 0 R >>",
               b"<< /Type /Pages /Kids [6 0 R] /Count 1 >>", None,
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(page) + page + b"\nendstream",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
               b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
               b"(" + b"a " * 1000 + b"b)"]
    first = len(objects) + 1
    for i in range(500):
        item = b"<< /Title 7 0 R /Parent 3 0 R /Dest [6 0 R /Fit]"
        if i > 0:
            item += b" /Prev %d 0 R" % (first + i - 1)
        if i < 499:
            item += b" /Next %d 0 R" % (first + i + 1)
        objects.append(item + b" >>")
    objects[2] = b"<< /Type /Outlines /First %d 0 R /Last %d 0 R /Count 500 >>" % (first, first + 499)
    write(out, "ingest_pdf", "long-outline", pdf_of(objects))


def seeds_window(data, out):
    dev = json.loads((data / "squad/dev-v1.1.json").read_text())
    for i, article in enumerate(dev["data"][:4]):
        p = article["paragraphs"][0]
        header = bytes([[24, 63, 40, 12][i], [8, 16, 0, 4][i], [10, 31, 5, 20][i]])
        text = p["qas"][0]["question"] + "\0" + p["context"][:600]
        write(out, "reader_window", f"squad-{i}", header + text.encode())


# GGUF value types, as in the GGUF specification.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALARS = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
           BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def gguf_read_metadata(path):
    """The metadata of a GGUF file as [(key, type, value)], arrays as (element type, list)."""
    with open(path, "rb") as f:
        def scalar(t):
            fmt = SCALARS[t]
            return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

        def string():
            (n,) = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8", "replace")

        def value(t):
            if t == STRING:
                return string()
            if t == ARRAY:
                (et,) = struct.unpack("<I", f.read(4))
                (n,) = struct.unpack("<Q", f.read(8))
                return (et, [value(et) for _ in range(n)])
            return scalar(t)

        magic, _version, _tensors, kv_count = struct.unpack("<4sIQQ", f.read(24))
        assert magic == b"GGUF", path
        out = []
        for _ in range(kv_count):
            key = string()
            (t,) = struct.unpack("<I", f.read(4))
            out.append((key, t, value(t)))
        return out


def gguf_write(metadata):
    """A GGUF v3 header with `metadata` and no tensors."""
    def string(s):
        b = s.encode()
        return struct.pack("<Q", len(b)) + b

    def value(t, v):
        if t == STRING:
            return string(v)
        if t == ARRAY:
            et, items = v
            return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
        return struct.pack(SCALARS[t], v)

    body = b"".join(string(k) + struct.pack("<I", t) + value(t, v) for k, t, v in metadata)
    return struct.pack("<4sIQQ", b"GGUF", 3, 0, len(metadata)) + body


def shrink_tokenizer(metadata, keep=120):
    """The metadata with its vocabulary cut to `keep` tokens and the merges that stay valid."""
    tokens = next(v[1] for k, t, v in metadata if k == "tokenizer.ggml.tokens")[:keep]
    vocab = set(tokens)
    out = []
    for key, t, v in metadata:
        if key == "tokenizer.ggml.tokens" or key == "tokenizer.ggml.token_type":
            v = (v[0], v[1][:keep])
        elif key == "tokenizer.ggml.merges":
            v = (v[0], [m for m in v[1] if all(p in vocab for p in m.split(" ")) and
                        m.replace(" ", "") in vocab][:60])
        elif key.endswith("_token_id") and v >= keep:
            v = keep - 1
        elif t == ARRAY:
            v = (v[0], v[1][:16])
        out.append((key, t, v))
    return out


def handmade_gguf_metadata():
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "a", "b", "ab", "Ġ", "Ġa", "1", "?"]
    return [("general.architecture", STRING, "llama"), ("general.name", STRING, "tiny"),
            ("llama.attention.head_count", U32, 2), ("llama.attention.head_count_kv", U32, 1),
            ("llama.embedding_length", U32, 8), ("llama.block_count", U32, 1),
            ("llama.context_length", U32, 64), ("llama.feed_forward_length", U32, 16),
            ("llama.rope.freq_base", F32, 10000.0), ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
            ("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, "smollm"),
            ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
            ("tokenizer.ggml.token_type", ARRAY, (I32, [3, 3, 3] + [1] * 7)),
            ("tokenizer.ggml.merges", ARRAY, (STRING, ["a b", "Ġ a"])),
            ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
            ("tokenizer.ggml.add_bos_token", BOOL, False)]


def seeds_gguf(gguf, out):
    write(out, "gguf_metadata", "handmade", gguf_write(handmade_gguf_metadata()))
    if gguf:
        real = shrink_tokenizer(gguf_read_metadata(gguf))
        write(out, "gguf_metadata", "real-header", gguf_write(real))


def main():
    data, repo, out = (pathlib.Path(a) for a in sys.argv[1:4])
    gguf = sys.argv[4] if len(sys.argv) > 4 else None
    sample = seeds_squad(data, repo, out)
    seeds_jsonl(data, sample, out)
    seeds_queries(data, out)
    seeds_trec(data, out)
    seeds_server(sample, out)
    seeds_html(repo, sample, out)
    seeds_docx(repo, out)
    seeds_pdf(data, out)
    seeds_window(data, out)
    seeds_gguf(gguf, out)


if __name__ == "__main__":
    main()
