"""Peer benchmarks measured fairly on a shared machine: the sides take turns.

Run one side after the other and a change in the machine's load lands on one side only: a peer
timed while another job ran looks slow, and the ratio says more about the load than the code. So
the sides alternate over several rounds (the order reversed every other round), each run records
the load average it started under, and reports give each side's min / median / max and the ratio
of medians, with the per-round ratios (each round's two runs were close in time).
"""

import os
import statistics


def load_average():
    """The 1-minute load average (0.0 where the system has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def alternate(sides, rounds):
    """Runs every `sides[name]()` once per round, in turns (reversed every other round).

    Each call returns a dict with a positive "rate" (higher is faster) and anything else.
    Returns {name: [result, ...]} in round order, each result with "load" (the load average
    before it ran) and "round" added."""
    names = list(sides)
    results = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            load = load_average()
            result = dict(sides[name]())
            result.update(load=load, round=r + 1)
            results[name].append(result)
    return results


def spread(values):
    """{'min', 'median', 'max'} of `values`."""
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summary(results, peer):
    """Per side: its rates' spread, the ratio of its median to `peer`'s, the per-round ratios'
    spread, and the load its runs started under."""
    peer_rates = [r["rate"] for r in results[peer]]
    out = {}
    for name, runs in results.items():
        rates = [r["rate"] for r in runs]
        out[name] = {
            "rate": spread(rates),
            "ratio_of_medians": statistics.median(rates) / statistics.median(peer_rates),
            "ratio_per_round": spread([a / b for a, b in zip(rates, peer_rates)]),
            "load": spread([r["load"] for r in runs]),
        }
    return out


def table(summary_, unit, peer):
    """Markdown rows: side, rate min / median / max, ratio of medians, per-round ratios, load."""
    lines = [
        f"| side | {unit} min / median / max | vs {peer} (medians) | per-round ratio min-max | load avg at start |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, s in summary_.items():
        r, q, load = s["rate"], s["ratio_per_round"], s["load"]
        lines.append(
            f"| {name} | {r['min']:.1f} / {r['median']:.1f} / {r['max']:.1f} | {s['ratio_of_medians']:.2f}x | "
            f"{q['min']:.2f}-{q['max']:.2f}x | {load['min']:.2f}-{load['max']:.2f} |"
        )
    return "\n".join(lines)
