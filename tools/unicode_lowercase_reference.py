#!/usr/bin/env python3
"""Dumps everything Python's `str.lower()` does, code point by code point, for comparison with
lector's lowercasing (crates/lector-eval/tests/unicode_lowercase.rs).

Output, one record a line, tab-separated:

    version  UNIDATA_VERSION
    lower    CODEPOINT  LOWERED          every code point (surrogates excepted) whose lowercase
                                         differs from itself; LOWERED is hex code points joined by '-'
    sigma    CODEPOINT  P1 P2 P3         every code point where one of the Final_Sigma probes is not
                                         what a character that is neither cased nor case-ignorable gives
    unassigned  FIRST  LAST              ranges of code points unassigned (Cn) in Python's database

The probes say whether a capital sigma lowers to final "ς": P1 in c + "Σ", P2 in "Α" + c + "Σ",
P3 in "ΑΣ" + c. Together they pin down how c counts in the Final_Sigma context (cased,
case-ignorable or neither). All numbers are hexadecimal. Standard library only.
"""
import sys
import unicodedata

SIGMA = "\u03a3"
ALPHA = "\u0391"
FINAL = "\u03c2"
PLAIN = (False, False, True)


def probes(ch):
    return (
        (ch + SIGMA).lower()[-1] == FINAL,
        (ALPHA + ch + SIGMA).lower()[-1] == FINAL,
        (ALPHA + SIGMA + ch).lower()[1] == FINAL,
    )


def code_points():
    return (c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def unassigned_ranges():
    start = None
    for c in range(0x110001):
        missing = c < 0x110000 and unicodedata.category(chr(c)) == "Cn"
        if missing and start is None:
            start = c
        elif not missing and start is not None:
            yield start, c - 1
            start = None


def main():
    out = sys.stdout
    out.write(f"version\t{unicodedata.unidata_version}\n")
    for c in code_points():
        ch = chr(c)
        lowered = ch.lower()
        if lowered != ch:
            out.write(f"lower\t{c:x}\t{'-'.join(f'{ord(x):x}' for x in lowered)}\n")
        flags = probes(ch)
        if flags != PLAIN:
            out.write(f"sigma\t{c:x}\t{' '.join(str(int(f)) for f in flags)}\n")
    for first, last in unassigned_ranges():
        out.write(f"unassigned\t{first:x}\t{last:x}\n")


if __name__ == "__main__":
    main()
