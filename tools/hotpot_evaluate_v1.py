#!/usr/bin/env python3
"""Faithful port of the official HotpotQA evaluation script, `hotpot_evaluate_v1.py` of the
hotpotqa/hotpot repository on GitHub.

Used as the reference that `lector_eval::hotpot` is tested against. The scoring is the official
one, expression for expression: normalize_answer (the SQuAD normalisation), f1_score with its
yes/no/noanswer special case, exact match, update_answer, update_sp over sets of (title, sentence)
tuples, the joint metrics, missing predictions scoring 0 and dropping the joint contribution,
every sum divided by the number of gold questions.

What differs is only the output:

- the metrics dict is printed as JSON (`json.dumps`, which writes floats in full `repr`) instead
  of Python's dict repr, so that values can be compared to the last bit;
- "missing answer" / "missing sp fact" messages go to stderr, keeping stdout JSON;
- `--per-question` first prints one JSON line per gold question with its values (0 where the
  official script adds nothing), then the metrics line;
- the standard `json` module replaces `ujson`.

    python3 tools/hotpot_evaluate_v1.py PRED.json GOLD.json [--per-question]

Standard library only.
"""
import argparse
import json
import re
import string
import sys
from collections import Counter

METRIC_KEYS = [
    "em", "f1", "prec", "recall",
    "sp_em", "sp_f1", "sp_prec", "sp_recall",
    "joint_em", "joint_f1", "joint_prec", "joint_recall",
]


def normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def f1_score(prediction, ground_truth):
    normalized_prediction = normalize_answer(prediction)
    normalized_ground_truth = normalize_answer(ground_truth)

    ZERO_METRIC = (0, 0, 0)

    if normalized_prediction in ["yes", "no", "noanswer"] and normalized_prediction != normalized_ground_truth:
        return ZERO_METRIC
    if normalized_ground_truth in ["yes", "no", "noanswer"] and normalized_prediction != normalized_ground_truth:
        return ZERO_METRIC

    prediction_tokens = normalized_prediction.split()
    ground_truth_tokens = normalized_ground_truth.split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return ZERO_METRIC
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1, precision, recall


def exact_match_score(prediction, ground_truth):
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def update_answer(metrics, prediction, gold):
    em = exact_match_score(prediction, gold)
    f1, prec, recall = f1_score(prediction, gold)
    metrics["em"] += em
    metrics["f1"] += f1
    metrics["prec"] += prec
    metrics["recall"] += recall
    # The official function returns (em, prec, recall); f1 is added for the per-question output.
    return em, prec, recall, f1


def update_sp(metrics, prediction, gold):
    cur_sp_pred = set(map(tuple, prediction))
    gold_sp_pred = set(map(tuple, gold))
    tp, fp, fn = 0, 0, 0
    for e in cur_sp_pred:
        if e in gold_sp_pred:
            tp += 1
        else:
            fp += 1
    for e in gold_sp_pred:
        if e not in cur_sp_pred:
            fn += 1
    prec = 1.0 * tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = 1.0 * tp / (tp + fn) if tp + fn > 0 else 0.0
    f1 = 2 * prec * recall / (prec + recall) if prec + recall > 0 else 0.0
    em = 1.0 if fp + fn == 0 else 0.0
    metrics["sp_em"] += em
    metrics["sp_f1"] += f1
    metrics["sp_prec"] += prec
    metrics["sp_recall"] += recall
    # The official function returns (em, prec, recall); f1 is added for the per-question output.
    return em, prec, recall, f1


def evaluate(prediction, gold, per_question=None):
    """The official `eval`, on loaded files; `per_question`, when a list, receives each
    question's values."""
    metrics = {key: 0 for key in METRIC_KEYS}
    for dp in gold:
        cur_id = dp["_id"]
        row = {key: 0.0 for key in METRIC_KEYS}
        can_eval_joint = True
        if cur_id not in prediction["answer"]:
            print("missing answer {}".format(cur_id), file=sys.stderr)
            can_eval_joint = False
        else:
            em, prec, recall, f1 = update_answer(metrics, prediction["answer"][cur_id], dp["answer"])
            row.update(em=float(em), f1=f1, prec=prec, recall=recall)
        if cur_id not in prediction["sp"]:
            print("missing sp fact {}".format(cur_id), file=sys.stderr)
            can_eval_joint = False
        else:
            sp_em, sp_prec, sp_recall, sp_f1 = update_sp(
                metrics, prediction["sp"][cur_id], dp["supporting_facts"])
            row.update(sp_em=sp_em, sp_f1=sp_f1, sp_prec=sp_prec, sp_recall=sp_recall)

        if can_eval_joint:
            joint_prec = prec * sp_prec
            joint_recall = recall * sp_recall
            if joint_prec + joint_recall > 0:
                joint_f1 = 2 * joint_prec * joint_recall / (joint_prec + joint_recall)
            else:
                joint_f1 = 0.
            joint_em = em * sp_em

            metrics["joint_em"] += joint_em
            metrics["joint_f1"] += joint_f1
            metrics["joint_prec"] += joint_prec
            metrics["joint_recall"] += joint_recall
            row.update(joint_em=joint_em, joint_f1=joint_f1, joint_prec=joint_prec, joint_recall=joint_recall)

        if per_question is not None:
            row = {key: float(value) for key, value in row.items()}
            row["_id"] = cur_id
            row["answered"] = cur_id in prediction["answer"]
            row["has_sp"] = cur_id in prediction["sp"]
            per_question.append(row)

    N = len(gold)
    for k in metrics.keys():
        metrics[k] /= N
    return metrics


def main():
    parser = argparse.ArgumentParser(description="Official HotpotQA evaluation script, ported.")
    parser.add_argument("prediction_file", metavar="pred.json")
    parser.add_argument("gold_file", metavar="gold.json")
    parser.add_argument("--per-question", action="store_true",
                        help="print one JSON line per gold question before the metrics")
    opts = parser.parse_args()
    with open(opts.prediction_file) as f:
        prediction = json.load(f)
    with open(opts.gold_file) as f:
        gold = json.load(f)
    rows = [] if opts.per_question else None
    metrics = evaluate(prediction, gold, rows)
    for row in rows or []:
        print(json.dumps(row))
    print(json.dumps(metrics))


if __name__ == "__main__":
    main()
