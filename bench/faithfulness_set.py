#!/usr/bin/env python3
"""Builds a perturbation set for measuring claim-level faithfulness checks, from SQuAD v1.1 paragraphs.

    python3 bench/faithfulness_set.py [--split dev|train] [--seed N] [--count N] [--out FILE] [--data DIR]

Each line of the output is one claim about one passage:

    {"id", "passage", "claim", "label": "supported"|"unsupported",
     "kind": "copied"|"paraphrased"|"negated"|"number"|"entity"|"date"|"unrelated"}

The passage is a whole SQuAD paragraph; the claim is built from one of its sentences (or, for `unrelated`, from
another article's). Half the claims are supported (copied and paraphrased, a quarter each), half unsupported
(the five other kinds, a tenth each). Everything is drawn from one `random.Random(seed)`, so a split and seed
always give the same file. Defaults: --split dev --seed 1 --count 300 --out bench/data/faithfulness-squad.jsonl,
which is the committed set; the held-out check is `--split train --seed 2 --out SOMEWHERE` (SQuAD v1.1 train:
other articles, other paragraphs, another seed).

How each kind is made (no model anywhere; plain string rules, listed with their limits):

- copied: a passage sentence, verbatim.
- paraphrased: a passage sentence rewritten by every structural rule that applies, then up to two synonyms:
  * a fronted phrase moves to the end ("In 1990, the city grew." -> "The city grew in 1990."), or a final
    "in YEAR" moves to the front;
  * a parenthesis or a non-restrictive relative clause (", which ...,", ", who ...") is dropped;
  * a passive "X was VERBed by Y ..." becomes the active "Y VERBed X ...";
  * words of a small list of general synonyms are swapped (SYNONYMS: pairs whose two forms fit the same
    syntactic slots, such as built/constructed, nearly/almost).
  Limits: the result keeps most of the sentence's words and its order; real paraphrase (new wording,
  summarising, merging sentences) is not covered, so this kind measures robustness to mild rewording only.
  At least one rule must apply, else the sentence is not used.
- negated: a negation removed when the sentence has one (not, n't, never, without -> with), else "not" inserted
  after the first auxiliary (is, was, has, could, ...), else "never" before the first past-tense verb.
- number: a number that is not a year changed (digits, with its format kept: "1,200" stays comma-grouped,
  "3.5" keeps one decimal; or a spelled-out two..twelve), to a value that occurs nowhere in the passage, so
  that the claim cannot be true of another thing the passage counts.
- date: a year (or decade, "1990s") moved by 1-30 years, or a month name replaced by another, to a value
  absent from the passage.
- entity: a capitalised name (not sentence-initial) replaced by a name taken from another article, absent
  from the passage.
- unrelated: a sentence of another article, against this passage.

Passages are paragraphs of at most MAX_PASSAGE characters (which keeps the committed 300-claim file under
300 KB); sentences of 6 to 45 words are used. Input: --data DIR (default $LECTOR_DATA_DIR, else ../shared/data
relative to the repository root) /squad/{dev,train}-v1.1.json (CC BY-SA 4.0). Plain Python 3, no dependencies.
"""
import argparse
import json
import os
import random
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_PASSAGE = 900
KINDS = [  # (kind, label, share of the set)
    ("copied", "supported", 0.25),
    ("paraphrased", "supported", 0.25),
    ("negated", "unsupported", 0.10),
    ("number", "unsupported", 0.10),
    ("date", "unsupported", 0.10),
    ("entity", "unsupported", 0.10),
    ("unrelated", "unsupported", 0.10),
]

ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "inc", "co", "corp", "ltd", "no", "vs", "etc", "e.g", "i.e",
    "u.s", "u.k", "a.d", "b.c", "ca", "approx", "gen", "gov", "sen", "rev", "prof", "mt", "ft", "jan", "feb",
    "aug", "sept", "oct", "nov", "dec", "fig", "vol", "op", "c",
}
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
DAYS = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
SPELLED = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
AUXILIARIES = ["is", "was", "are", "were", "has", "have", "had", "can", "could", "will", "would", "should",
               "may", "might", "must", "does", "did", "do"]
CONTRACTIONS = {"didn't": "did", "doesn't": "does", "don't": "do", "isn't": "is", "wasn't": "was",
                "aren't": "are", "weren't": "were", "hasn't": "has", "haven't": "have", "hadn't": "had",
                "couldn't": "could", "wouldn't": "would", "shouldn't": "should", "won't": "will",
                "can't": "can", "cannot": "can"}
# General synonyms, one way (old -> new), chosen so that the new form fits every syntactic slot of the old
# one: past tense = participle (built/constructed), adverb for adverb, no forms that change a following
# article or preposition.
SYNONYMS = [
    ("built", "constructed"), ("constructed", "built"), ("purchased", "bought"), ("bought", "purchased"),
    ("founded", "established"), ("established", "founded"), ("nearly", "almost"), ("almost", "nearly"),
    ("often", "frequently"), ("frequently", "often"), ("usually", "typically"), ("typically", "usually"),
    ("mainly", "mostly"), ("mostly", "mainly"), ("primarily", "mainly"), ("rapidly", "quickly"),
    ("quickly", "rapidly"), ("entire", "whole"), ("located", "situated"), ("situated", "located"),
    ("famous", "well-known"), ("well-known", "famous"), ("largest", "biggest"), ("attempted", "tried"),
    ("helped", "assisted"), ("assisted", "helped"), ("allowed", "permitted"), ("permitted", "allowed"),
    ("required", "needed"), ("completed", "finished"), ("obtained", "acquired"), ("acquired", "obtained"),
    ("showed", "demonstrated"), ("demonstrated", "showed"), ("huge", "enormous"), ("enormous", "huge"),
    ("although", "though"), ("thus", "therefore"), ("therefore", "thus"), ("numerous", "many"),
    ("approximately", "about"), ("roughly", "about"), ("began", "started"), ("commenced", "began"),
    ("despite", "in spite of"), ("in order to", "to"), ("among", "amongst"), ("currently", "at present"),
    ("important", "significant"), ("smallest", "tiniest"), ("extremely", "very"),
]
FUNCTION_STARTS = {"The", "A", "An", "This", "These", "Those", "That", "It", "Its", "He", "She", "They",
                   "His", "Her", "Their", "There", "In", "On", "At", "During", "After", "Before", "By",
                   "Since", "From", "For", "Some", "Many", "Most", "All", "Each", "Other", "Such"}
FRONT_PREPOSITIONS = ["In", "On", "At", "During", "After", "Before", "By", "Since", "From", "Following",
                      "Under", "Throughout", "Between", "Within", "Over", "Until", "Upon", "Despite", "With"]
# A sentence ends at . ! ? (with a closing quote or bracket, or a wiki note like "[citation needed]").
SPLIT_AT = re.compile(r"(?<=[.!?])(?:\[[^\]]{1,30}\])?[\"')]?\s+(?=[A-Z\"'(0-9])")


def sentences(paragraph):
    """The paragraph's sentences: split after . ! ? and whitespace, except after a known abbreviation or an
    initial (a single letter)."""
    out, start = [], 0
    for match in SPLIT_AT.finditer(paragraph):
        before = paragraph[start:match.start()].split()
        last = before[-1].rstrip(".!?\"')]").lower() if before else ""
        if last in ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
            continue
        out.append(paragraph[start:match.end()].strip())
        start = match.end()
    out.append(paragraph[start:].strip())
    return [s for s in out if s]


def usable(sentence):
    n = len(sentence.split())
    return 6 <= n <= 45 and sentence[-1] in ".!?" and sentence[0].isupper()


def word_re(word):
    return re.compile(r"(?<![\w'-])" + re.escape(word) + r"(?![\w'-])")


def capitalise(text):
    return text[:1].upper() + text[1:]


def decapitalise(text):
    first = text.split(" ", 1)[0]
    return text[:1].lower() + text[1:] if first in FUNCTION_STARTS else text


# ---------------------------------------------------------------- paraphrase


def front_to_end(s):
    m = re.match(r"^(%s) ([^,]{1,70}), (.+)([.!?])$" % "|".join(FRONT_PREPOSITIONS), s)
    if not m or len(m.group(2).split()) > 10 or len(m.group(3).split()) < 4:
        return None
    return f"{capitalise(m.group(3))} {m.group(1).lower()} {m.group(2)}{m.group(4)}"


def year_to_front(s):
    m = re.match(r"^(.{20,}?),? in ((?:1[0-9]|20)\d\d)([.!?])$", s)
    if not m or "," in m.group(1)[-3:]:
        return None
    return f"In {m.group(2)}, {decapitalise(m.group(1))}{m.group(3)}"


def drop_parenthesis(s):
    out = re.sub(r" \([^()]*\)", "", s)
    return out if out != s else None


def drop_relative_clause(s):
    # The clause must end where the sentence's predicate resumes (a lower-case word), not inside
    # an apposition ("Port Phillip Bay, which includes ... city, Melbourne, ...").
    out = re.sub(r", (?:which|who|whose|where) [^,;]+,(?= [a-z])", "", s, count=1)
    if out == s:
        out = re.sub(r", (?:which|who|whose) [^,;]+([.!?])$", r"\1", s)
    return out if out != s and len(out.split()) >= 6 else None


def passive_to_active(s):
    preps = "in|on|at|during|for|with|from|as|after|before|since|until|through|to|between"
    m = re.match(r"^([^,]+?) (?:was|were) (\w+ed) by ([A-Z][^,]*?)((?: (?:%s) [^,]*)?)([.!?])$" % preps, s)
    if not m or len(m.group(3).split()) > 6:
        return None
    obj, verb, agent, rest, end = m.groups()
    return f"{agent} {verb} {decapitalise(obj)}{rest}{end}"


def synonyms(s, rng):
    pairs = list(SYNONYMS)
    rng.shuffle(pairs)
    done = 0
    for old, new in pairs:
        pattern = word_re(old)
        if done < 2 and pattern.search(s):
            s = pattern.sub(new, s, count=1)
            done += 1
    return s, done


def paraphrase(s, rng):
    out = s
    for rule in (drop_parenthesis, drop_relative_clause, passive_to_active, front_to_end, year_to_front):
        changed = rule(out)
        if changed:
            out = changed
    out, _ = synonyms(out, rng)
    return out if out != s else None


# ---------------------------------------------------------------- negation


def negate(s, rng):
    for contraction, plain in CONTRACTIONS.items():
        if word_re(contraction).search(s):
            return word_re(contraction).sub(plain, s, count=1)
    # "not only ... but" is no negation: removing its "not" would not contradict the sentence.
    for cue, replacement in ((r" not (?!only\b)", " "), (r" never ", " "), (r" without ", " with ")):
        if re.search(cue, s):
            return re.sub(cue, replacement, s, count=1)
    words = s.split(" ")
    for i, w in enumerate(words[1:], 1):
        if w in AUXILIARIES and i + 1 < len(words) and words[i + 1] not in ("not", "to", "no", "never", "only"):
            return " ".join(words[:i + 1] + ["not"] + words[i + 1:])
    for i, w in enumerate(words[1:], 1):
        bare = w.rstrip(",.;")
        if re.fullmatch(r"[a-z]{3,}ed", bare) and words[i - 1] not in ("the", "a", "an", "and", "or", "of"):
            return " ".join(words[:i] + ["never"] + words[i:])
    return None


# ---------------------------------------------------------------- numbers and dates

NUMBER = re.compile(r"(?<![\w.,-])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w-])")
YEAR = re.compile(r"(?<![\w.,-])((?:1[0-9]|20)\d\d)(s?)(?![\w-])")


def values_in(text):
    """Every number in `text` as a float (commas dropped; two..twelve as words too), for the absence check."""
    digits = {float(m.group(1).replace(",", "")) for m in NUMBER.finditer(text)}
    words = {float(i + 2) for i, w in enumerate(SPELLED) if re.search(r"\b%s\b" % w, text, re.I)}
    return digits | words


def is_year(token):
    return re.fullmatch(r"(?:1[0-9]|20)\d\d", token) is not None


def format_like(original, value):
    if "." in original:
        decimals = len(original.split(".")[1])
        return f"{value:.{decimals}f}"
    if "," in original:
        return f"{int(value):,}"
    return str(int(value))


def swap_number(s, passage, rng):
    notes = [m.span() for m in re.finditer(r"\[[^\]]*\]", s)]  # "[note 8]" is no claim
    candidates = [m for m in NUMBER.finditer(s)
                  if not is_year(m.group(1)) and not any(a <= m.start() < b for a, b in notes)]
    spelled = [m for m in re.finditer(r"\b(%s)\b" % "|".join(SPELLED), s)]
    present = values_in(passage)
    if candidates:
        m = rng.choice(candidates)
        old = float(m.group(1).replace(",", ""))
        for _ in range(20):
            factor = rng.choice([0.5, 0.7, 0.8, 1.25, 1.5, 2.0, 3.0])
            new = old * factor if old >= 4 else old + rng.choice([2, 3, 5, 7])
            if "." not in m.group(1):
                new = round(new)
            if new != old and new not in present and new >= 0:
                return s[:m.start(1)] + format_like(m.group(1), new) + s[m.end(1):]
        return None
    if spelled:
        m = rng.choice(spelled)
        others = [w for i, w in enumerate(SPELLED) if w != m.group(1) and float(i + 2) not in present]
        if others:
            return s[:m.start(1)] + rng.choice(others) + s[m.end(1):]
    return None


def swap_date(s, passage, rng):
    years = list(YEAR.finditer(s))
    months = [m for m in re.finditer(r"(?<=\w )(%s)\b" % "|".join(MONTHS), s)]
    if years and (not months or rng.random() < 0.6):
        m = rng.choice(years)
        old = int(m.group(1))
        for _ in range(20):
            step = rng.randint(1, 30) * rng.choice([-1, 1])
            if m.group(2):  # a decade keeps its form
                step = 10 * rng.choice([-3, -2, -1, 1, 2])
            new = old + step
            if str(new) not in passage and 1000 <= new <= 2025:
                return s[:m.start(1)] + str(new) + s[m.end(1):]
        return None
    if months:
        m = rng.choice(months)
        others = [x for x in MONTHS if x not in passage]
        if others:
            return s[:m.start(1)] + rng.choice(others) + s[m.end(1):]
    return None


# ---------------------------------------------------------------- entities

NAME = re.compile(r"(?<=[a-z,;:] )((?:[A-Z][\w'-]*[a-z][\w'-]*)(?: (?:of |de |the )?[A-Z][\w'-]*[a-z][\w'-]*){0,3})")


def names_in(sentence):
    """Capitalised word sequences after a lower-case word: the names a sentence mentions, not its first word."""
    out = []
    for m in NAME.finditer(sentence):
        name = m.group(1)
        if name in DAYS or name in MONTHS or name in FUNCTION_STARTS or len(name) < 3:
            continue
        out.append(m)
    return out


def swap_entity(s, passage, pool, rng):
    names = names_in(s)
    if not names:
        return None
    m = rng.choice(names)
    width = len(m.group(1).split())
    lower = passage.lower()
    same_width = [n for n in pool if len(n.split()) == width] or pool
    for _ in range(50):
        new = rng.choice(same_width)
        if not any(w.lower() in lower for w in new.split() if len(w) > 3) and new.lower() not in lower:
            return s[:m.start(1)] + new + s[m.end(1):]
    return None


# ---------------------------------------------------------------- the set


def load(path):
    with open(path, encoding="utf-8") as f:
        articles = json.load(f)["data"]
    return [(a["title"], [p["context"] for p in a["paragraphs"]]) for a in articles]


def build(articles, count, rng):
    paragraphs = [(t, p) for t, ps in articles for p in ps if len(p) <= MAX_PASSAGE]
    pool_by_title = {}
    for title, ps in articles:
        for p in ps:
            for s in sentences(p):
                pool_by_title.setdefault(title, set()).update(m.group(1) for m in names_in(s))
    wanted = []
    for kind, label, share in KINDS:
        wanted += [(kind, label)] * round(count * share)
    rng.shuffle(wanted)
    items, used = [], set()
    for kind, label in wanted:
        for _ in range(10_000):
            title, passage = rng.choice(paragraphs)
            candidates = [s for s in sentences(passage) if usable(s)]
            if not candidates:
                continue
            sentence = rng.choice(candidates)
            if (sentence, kind) in used:
                continue
            claim = make(kind, sentence, title, passage, articles, pool_by_title, rng)
            if claim and claim != sentence or (claim and kind == "copied"):
                used.add((sentence, kind))
                items.append({"passage": passage, "claim": claim, "label": label, "kind": kind})
                break
        else:
            sys.exit(f"could not build a `{kind}` claim")
    return items


def make(kind, sentence, title, passage, articles, pool_by_title, rng):
    if kind == "copied":
        return sentence
    if kind == "paraphrased":
        return paraphrase(sentence, rng)
    if kind == "negated":
        return negate(sentence, rng)
    if kind == "number":
        return swap_number(sentence, passage, rng)
    if kind == "date":
        return swap_date(sentence, passage, rng)
    if kind == "entity":
        pool = sorted(n for t, names in pool_by_title.items() if t != title for n in names)
        return swap_entity(sentence, passage, pool, rng)
    if kind == "unrelated":
        other_title, others = rng.choice([a for a in articles if a[0] != title])
        candidates = [s for p in others for s in sentences(p) if usable(s)]
        return rng.choice(candidates) if candidates else None
    raise ValueError(kind)


def data_dir(arg):
    if arg:
        return arg
    return os.environ.get("LECTOR_DATA_DIR") or os.path.join(ROOT, "..", "shared", "data")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=["dev", "train"], default="dev")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "data", "faithfulness-squad.jsonl"))
    parser.add_argument("--data")
    args = parser.parse_args()
    articles = load(os.path.join(data_dir(args.data), "squad", f"{args.split}-v1.1.json"))
    rng = random.Random(args.seed)
    items = build(articles, args.count, rng)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        for i, item in enumerate(items):
            row = {"id": f"{args.split}-{args.seed}-{i:04d}", **item}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    by_kind = {}
    for item in items:
        by_kind[item["kind"]] = by_kind.get(item["kind"], 0) + 1
    size = os.path.getsize(args.out)
    print(f"{len(items)} claims ({size / 1024:.0f} KB) -> {args.out}: " +
          ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())))


if __name__ == "__main__":
    main()
