#!/usr/bin/env python3
"""Summarize a kernel trace (kernel_trace.cpp's CSV) of a parley bench run.

Graphed work (decoder steps) is grouped by graph: each graph's replays are cut from its
records by its node count, and for each node position the script prints the median
duration and the median amount the node moved the replay's end forward (its share of the
critical path: with programmatic launches kernels overlap, so durations do not add up).
Kernels outside graphs (mel, encoder, prefix) are summed by name.

    python3 tools/device/kernel_trace.py trace.csv [--top 25]

--timeline cuts the trace into runs at each STFT kernel (every end-to-end run starts with
the mel) and prints, per run, its span, the GPU's idle time inside it and the largest idle
gaps with the kernels on either side: where the host kept the device waiting.
"""
import argparse
import collections
import csv
import statistics


def short(name, width=70):
    name = name.replace("parley::cuda::", "").replace("void ", "")
    return name if len(name) <= width else name[: width - 3] + "..."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--timeline", action="store_true")
    ap.add_argument("--gaps", type=int, default=8, help="gaps listed per run (--timeline)")
    args = ap.parse_args()
    rows = []
    with open(args.trace) as f:
        for r in csv.DictReader(f):
            rows.append((int(r["start_ns"]), int(r["end_ns"]), int(r["graph_id"]),
                         int(r["graph_node_id"]), r["name"], r["grid"]))
    rows.sort()
    if args.timeline:
        timeline(rows, args.gaps)
        return
    graphs = collections.defaultdict(list)
    eager = collections.defaultdict(list)
    for row in rows:
        (graphs[row[2]] if row[2] else eager[row[4]]).append(row)

    # Graph replays, grouped by shape (node count and kernel sequence).
    shapes = collections.defaultdict(list)  # sequence of names -> list of replays
    for gid, recs in graphs.items():
        nodes = len({r[3] for r in recs})
        for i in range(0, len(recs) - nodes + 1, nodes):
            rep = sorted(recs[i:i + nodes])
            shapes[tuple(r[4] for r in rep)].append(rep)
    for seq, reps in sorted(shapes.items(), key=lambda kv: -len(kv[1])):
        if len(reps) < 3:
            continue
        reps.sort()
        spans = [rep[-1][1] - rep[0][0] for rep in reps]
        ends = [max(r[1] for r in rep) - rep[0][0] for rep in reps]
        print(f"\n== graph shape: {len(seq)} kernels, {len(reps)} replays; "
              f"median span {statistics.median(ends) / 1e3:.1f} us")
        per_pos = []
        for p in range(len(seq)):
            dur = statistics.median(rep[p][1] - rep[p][0] for rep in reps)
            inc = statistics.median(
                rep[p][1] - (max(r[1] for r in rep[:p]) if p else rep[0][0]) for rep in reps)
            per_pos.append((p, seq[p], dur, inc, reps[0][p][5]))
        print(f"{'#':>3} {'dur us':>7} {'adds us':>7}  grid        kernel")
        for p, name, dur, inc in ((a, b, c, d) for a, b, c, d, _ in per_pos):
            print(f"{p:3d} {dur / 1e3:7.2f} {inc / 1e3:7.2f}  {per_pos[p][4]:<11} {short(name)}")
        by_name = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for _, name, dur, inc, _ in per_pos:
            k = short(name, 50)
            by_name[k][0] += 1
            by_name[k][1] += dur
            by_name[k][2] += inc
        print("  by kernel: count, sum of durations, sum of critical-path shares (us)")
        for k, (n, d, i) in sorted(by_name.items(), key=lambda kv: -kv[1][2]):
            print(f"  {n:3d} {d / 1e3:8.1f} {i / 1e3:8.1f}  {k}")
        # Host gaps: from one replay's end to the next replay's start, for replays in a row.
        gaps = sorted(b[0][0] - a[-1][1] for a, b in zip(reps, reps[1:]) if b[0][0] > a[-1][1])
        if gaps:
            print(f"  gap to the next replay of this shape: median {statistics.median(gaps) / 1e3:.1f} us")

    print("\n== kernels outside graphs, by total time")
    tot = sorted(((sum(r[1] - r[0] for r in v), len(v), k) for k, v in eager.items()), reverse=True)
    for t, n, k in tot[: args.top]:
        print(f"{t / 1e3:10.1f} us {n:6d} calls {t / n / 1e3:8.2f} us each  {short(k)}")


def timeline(rows, n_gaps):
    starts = [i for i, r in enumerate(rows) if "stft_frames" in r[4]] + [len(rows)]
    for a, b in zip(starts, starts[1:]):
        run = rows[a:b]
        end, idle, gaps = run[0][1], 0, []
        for prev, cur in zip(run, run[1:]):
            if cur[0] > end:
                idle += cur[0] - end
                gaps.append((cur[0] - end, short(prev[4], 40), short(cur[4], 40), cur[2] != 0))
            end = max(end, cur[1])
        span = end - run[0][0]
        n_graph = sum(1 for r in run if r[2])
        print(f"\n== run at +{(run[0][0] - rows[0][0]) / 1e6:.1f} ms: span {span / 1e3:.1f} us, "
              f"{len(run)} kernels ({n_graph} in graphs), GPU idle {idle / 1e3:.1f} us")
        by_kind = collections.defaultdict(lambda: [0, 0])
        for g, _, after, in_graph in gaps:
            k = "before a graph replay" if in_graph else "before " + after
            by_kind[k][0] += 1
            by_kind[k][1] += g
        for k, (n, g) in sorted(by_kind.items(), key=lambda kv: -kv[1][1])[:n_gaps]:
            print(f"  idle {g / 1e3:8.1f} us in {n:4d} gaps {k}")
        for g, before, after, _ in sorted(gaps, reverse=True)[:n_gaps]:
            print(f"  gap {g / 1e3:8.1f} us  after {before}  before {after}")


if __name__ == "__main__":
    main()
