"""PDFs written object by object, for benchmarks and fuzzing seeds that need a PDF of a given shape
(a long document, pages sharing a stream, a long outline) without a PDF library."""


def pdf_of(objects):
    """A PDF of `objects` (object i + 1 is objects[i]) with its cross-reference table."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for i, body in enumerate(objects):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % (i + 1) + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def escape(text):
    """`text` as the inside of a PDF string literal."""
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
