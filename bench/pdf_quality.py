#!/usr/bin/env python3
"""Answer F1 over PDFs against F1 over the plain text of the same documents (docs/pdf-extraction.md).

The first --articles articles of SQuAD v1.1 dev become documents twice: a `.txt` file (the
paragraphs joined by blank lines) and a `.pdf` typeset by reportlab, as a word processor would:
justified Times paragraphs with end-of-line hyphenation (pyphen), a running header (the title),
a page number in the footer, US Letter. Each set is indexed into its own index (BM25) and every
question of those articles is asked with `lector eval odqa --questions` (same reader, same k);
the table compares end-to-end EM/F1 and the passages' recall of the answer.

    python3 bench/pdf_quality.py [--lector target/release/lector] [--articles 12] [--json]

The first run makes a virtual environment under ~/.cache/lector/bench-pdf with reportlab and
pyphen from PyPI and re-runs itself there.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("LECTOR_DATA_DIR", ROOT.parent / "shared" / "data"))
VENV = Path.home() / ".cache" / "lector" / "bench-pdf"


def in_venv():
    """Re-runs this script in the bench's own environment, made on first use."""
    python = VENV / "bin" / "python"
    if Path(sys.prefix) == VENV:
        return
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "reportlab==5.1.0", "pyphen==0.18.1"],
                       check=True)
    os.execv(str(python), [str(python), *sys.argv])


def typeset(title, paragraphs, path):
    """`paragraphs` as a PDF at `path`: justified, hyphenated, a header and a page number."""
    from reportlab.lib.enums import TA_JUSTIFY
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer
    from xml.sax.saxutils import escape

    body = ParagraphStyle("body", fontName="Times-Roman", fontSize=11, leading=14, alignment=TA_JUSTIFY,
                          hyphenationLang="en_US", embeddedHyphenation=1, uriWasteReduce=0.3)

    def furniture(canvas, doc):
        canvas.saveState()
        canvas.setFont("Times-Italic", 9)
        canvas.drawString(72, 750, title.replace("_", " "))
        canvas.drawRightString(540, 40, str(doc.page))
        canvas.restoreState()

    doc = SimpleDocTemplate(str(path), pagesize=letter, title=title.replace("_", " "),
                            topMargin=72, bottomMargin=72)
    story = []
    for text in paragraphs:
        story += [Paragraph(escape(text), body), Spacer(1, 6)]
    doc.build(story, onFirstPage=furniture, onLaterPages=furniture)


def odqa(lector, index, questions):
    out = subprocess.run([lector, "eval", "odqa", "--questions", str(questions), "--index", str(index),
                          "--json"], check=True, text=True, capture_output=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lector", default=str(ROOT / "target" / "release" / "lector"))
    ap.add_argument("--articles", type=int, default=12)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    in_venv()
    articles = json.loads((DATA / "squad" / "dev-v1.1.json").read_text())["data"][: args.articles]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        questions = work / "questions.jsonl"
        with open(questions, "w") as q:
            for article in articles:
                title = article["title"]
                paragraphs = [p["context"] for p in article["paragraphs"]]
                for kind in ("txt", "pdf"):
                    (work / kind).mkdir(exist_ok=True)
                (work / "txt" / f"{title}.txt").write_text("\n\n".join(paragraphs) + "\n")
                typeset(title, paragraphs, work / "pdf" / f"{title}.pdf")
                for p in article["paragraphs"]:
                    for qa in p["qas"]:
                        answers = [a["text"] for a in qa["answers"]]
                        q.write(json.dumps({"id": qa["id"], "question": qa["question"], "answer": answers}) + "\n")
        n = sum(1 for _ in open(questions))
        pages = 0
        results = {}
        for kind in ("txt", "pdf"):
            index = work / f"index-{kind}"
            subprocess.run([args.lector, "index", "add", str(work / kind), "--index", str(index)], check=True,
                           capture_output=True)
            if kind == "pdf":
                for pdf in (work / "pdf").glob("*.pdf"):
                    pages += pdf.read_bytes().count(b"/Type /Page\n") + pdf.read_bytes().count(b"/Type /Page ")
            results[kind] = odqa(args.lector, index, questions)
            print(f"  {kind}: done", file=sys.stderr)
    summary = {kind: {key: r[key] for key in ("exact_match", "f1", "recall@5")} for kind, r in results.items()}
    summary["gap_f1"] = results["txt"]["f1"]["mean"] - results["pdf"]["f1"]["mean"]
    summary.update({"articles": len(articles), "questions": n, "pdf_pages": pages})
    if args.json:
        print(json.dumps({"summary": summary, "results": results}))
        return
    print(f"{len(articles)} SQuAD v1.1 dev articles ({pages} PDF pages), {n} questions, BM25, k = 5; "
          f"PDFs typeset by reportlab (justified, hyphenated, running header, page numbers)")
    print("| documents | EM | F1 | answer in the passages read (recall@5) |")
    print("| --- | --: | --: | --: |")
    cell = lambda m: f"{m['mean']:.1f} [{m['low']:.1f}, {m['high']:.1f}]"  # noqa: E731
    for kind, name in (("txt", "plain text"), ("pdf", "PDF")):
        r = results[kind]
        print(f"| {name} | {cell(r['exact_match'])} | {cell(r['f1'])} | {cell(r['recall@5'])} |")
    print(f"F1 gap (text - PDF): {summary['gap_f1']:.2f}")


if __name__ == "__main__":
    main()
