"""Where the time goes: a loader's Chrome trace (and the trainer's step timings) as a timeline and a
stall attribution.

    python3 -m stoke.report TRACE.json [--steps STEPS.json] --out report.html

TRACE.json is what `Loader.trace(path)` (or `stoke bench load --trace`) writes: one complete event
per span of the pipeline (plan, fetch, decode, transform, collate on the loader's threads; wait on
the consumer's), each with the batch it served. STEPS.json is the trainer's per-step log of the
experiments (`stoke.experiments.train`): {"steps": [{"epoch", "step", "start", "data_wait",
"h2d", "forward_backward", "optimizer", "total"}, ...]}, times in seconds of any monotonic clock
(the report aligns them with the trace by matching the trainer's data waits with the loader's).

Stall attribution. A stall is a consumer wait (a "wait" span of at least `min_stall` seconds) for
batch b. Every instant of it is charged to the stage that held batch b back at that instant: the
earliest stage of the pipeline (fetch < decode < transform < collate) with a span of batch b
running then (planning the reads counts as fetch); when none was running, the stage of batch b that
started next (the batch was queued for it: workers or reads were busy with other batches); when
nothing of batch b ran later either, "other". The stage charged most of a stall is the one that was
behind for it. With step timings, host-to-device copies are charged to "copy". The spans of batch b
are those of its latest production: begun after the previous wait for the same batch number (an
earlier epoch) ended.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .experiments import html as H
from .experiments.text import text_table

PIPELINE = ("fetch", "decode", "transform", "collate")      # order of the stages a batch goes through
STALL_STAGES = PIPELINE + ("copy", "other")
STAGE_COLORS = {"fetch": "#4e79a7", "decode": "#f28e2b", "transform": "#59a14f", "collate": "#b07aa1",
                "copy": "#edc948", "other": "#bab0ac", "wait": "#e15759", "plan": "#9cc3e6"}
STEP_COLORS = {"data wait": "#ff9da7", "host-to-device": "#edc948", "forward/backward": "#76b7b2",
               "optimizer": "#9c755f"}
_ORDER = {"plan": 0, "fetch": 0, "decode": 1, "transform": 2, "collate": 3}


class ReportError(ValueError):
    """Input that is not a loader trace or a step log; the message names the file and the place."""


@dataclass(frozen=True)
class Span:
    stage: str
    start: float  # seconds on the trace's clock
    end: float
    batch: int
    tid: int


@dataclass
class Trace:
    path: str
    spans: List[Span]
    threads: Dict[int, str]


def _number(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ReportError(f"{what} is not a finite number: {v!r}")
    return float(v)


def load_trace(path: str) -> Trace:
    """Reads a Chrome trace written by the loader. ReportError names the file (and event) on bad input."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{path}: no such trace file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: cannot read the trace: {e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc if isinstance(doc, list) else None
    if not isinstance(events, list):
        raise ReportError(f"{path}: no traceEvents list: not a Chrome trace")
    spans: List[Span] = []
    threads: Dict[int, str] = {}
    for i, ev in enumerate(events):
        where = f"{path}: event {i}"
        if not isinstance(ev, dict):
            raise ReportError(f"{where}: not an object")
        ph = ev.get("ph")
        if ph == "M":
            if ev.get("name") == "thread_name" and isinstance(ev.get("args"), dict):
                threads[int(_number(ev.get("tid", 0), f"{where}: tid"))] = str(ev["args"].get("name", ""))
            continue
        if ph != "X":
            continue
        name = ev.get("name")
        if not isinstance(name, str):
            raise ReportError(f"{where}: 'name' is not a string")
        ts = _number(ev.get("ts"), f"{where}: 'ts'")
        dur = _number(ev.get("dur"), f"{where}: 'dur'")
        if dur < 0:
            raise ReportError(f"{where}: negative duration {dur}")
        args = ev.get("args", {})
        if not isinstance(args, dict):
            raise ReportError(f"{where}: 'args' is not an object")
        batch = int(_number(args.get("batch", -1), f"{where}: args.batch"))
        tid = int(_number(ev.get("tid", 0), f"{where}: 'tid'"))
        spans.append(Span(name, ts / 1e6, (ts + dur) / 1e6, batch, tid))
    spans.sort(key=lambda s: (s.start, s.end))
    return Trace(str(path), spans, threads)


STEP_FIELDS = ("start", "data_wait", "h2d", "forward_backward", "optimizer", "total")


def load_steps(path: str) -> List[Dict[str, float]]:
    """Reads a trainer's step log ({"steps": [...]} or a bare list)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path}: no such step file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: cannot read the steps: {e}") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    steps = doc.get("steps") if isinstance(doc, dict) else doc
    if not isinstance(steps, list):
        raise ReportError(f"{path}: no steps list")
    out = []
    for i, s in enumerate(steps):
        if not isinstance(s, dict):
            raise ReportError(f"{path}: step {i}: not an object")
        rec = {k: _number(s.get(k), f"{path}: step {i}: '{k}'") for k in STEP_FIELDS}
        rec["epoch"] = int(_number(s.get("epoch", 0), f"{path}: step {i}: 'epoch'"))
        rec["step"] = int(_number(s.get("step", i), f"{path}: step {i}: 'step'"))
        out.append(rec)
    return out


# ---------------------------------------------------------------------------
# analysis

def _waits(trace: Trace) -> List[Span]:
    return [s for s in trace.spans if s.stage == "wait"]


def align_steps(trace: Trace, steps: Sequence[Dict[str, float]]) -> Optional[float]:
    """The offset to add to step times to put them on the trace's clock: the median difference
    between the end of the loader's wait for a batch and the end of the trainer's data wait for it
    (the k-th wait for batch number b is epoch k's). None when nothing pairs."""
    by_batch: Dict[int, List[Span]] = {}
    for w in _waits(trace):
        by_batch.setdefault(w.batch, []).append(w)
    epochs = sorted({s["epoch"] for s in steps})
    rank = {e: i for i, e in enumerate(epochs)}
    diffs = []
    for s in steps:
        ws = by_batch.get(int(s["step"]), [])
        k = rank[s["epoch"]]
        if k < len(ws):
            diffs.append(ws[k].end - (s["start"] + s["data_wait"]))
    if not diffs:
        return None
    diffs.sort()
    return diffs[len(diffs) // 2]


def attribute_stalls(trace: Trace, steps: Optional[Sequence[Dict[str, float]]] = None,
                     min_stall: float = 1e-3) -> Dict[str, Any]:
    """The stall attribution (see the module's docstring) as a JSON-ready dict."""
    by_batch: Dict[int, List[Span]] = {}
    for s in trace.spans:
        if s.stage in _ORDER:
            by_batch.setdefault(s.batch, []).append(s)
    starts = {b: [s.start for s in spans] for b, spans in by_batch.items()}
    charged = {st: 0.0 for st in STALL_STAGES}
    behind_count = {st: 0 for st in STALL_STAGES}
    waits = _waits(trace)
    prev_end: Dict[int, float] = {}
    stalls: List[Dict[str, Any]] = []
    total_wait = 0.0
    for w in waits:
        total_wait += w.end - w.start
        lo = prev_end.get(w.batch, -math.inf)
        prev_end[w.batch] = w.end
        if w.end - w.start < min_stall:
            continue
        spans = by_batch.get(w.batch, [])
        # spans of this production of the batch: begun after the previous wait for it, by the wait's end
        i0 = bisect.bisect_right(starts.get(w.batch, []), lo)
        i1 = bisect.bisect_right(starts.get(w.batch, []), w.end)
        cand = spans[i0:i1]
        here = _charge(cand, w.start, w.end)
        for st, v in here.items():
            charged[st] += v
        behind = max(here, key=lambda k: here[k]) if here else "other"
        behind_count[behind] += 1
        stalls.append({"batch": w.batch, "start": w.start, "seconds": w.end - w.start, "behind": behind,
                       "by_stage": {k: v for k, v in here.items() if v > 0}})
    copy_seconds = 0.0
    offset = None
    trainer_wait = None
    if steps:
        offset = align_steps(trace, steps)
        for s in steps:
            copy_seconds += s["h2d"]
            if s["h2d"] >= min_stall:
                behind_count["copy"] += 1
        charged["copy"] = copy_seconds
        trainer_wait = sum(s["data_wait"] for s in steps)
    stalls.sort(key=lambda s: -s["seconds"])
    stall_seconds = sum(s["seconds"] for s in stalls)
    return {
        "waits": len(waits), "wait_seconds": total_wait, "stalls": len(stalls), "stall_seconds": stall_seconds,
        "min_stall_seconds": min_stall,
        "by_stage": {st: {"seconds": charged[st], "stalls_behind": behind_count[st]} for st in STALL_STAGES},
        "longest": stalls[:10],
        "trainer_data_wait_seconds": trainer_wait, "step_offset_seconds": offset,
        "busy_seconds": _busy(trace),
    }


def _charge(spans: Sequence[Span], t0: float, t1: float) -> Dict[str, float]:
    """Seconds of [t0, t1) charged to each stage from the spans of one batch."""
    stage_of = lambda s: "fetch" if s.stage == "plan" else s.stage  # noqa: E731
    cuts = sorted({t0, t1, *[min(max(s.start, t0), t1) for s in spans], *[min(max(s.end, t0), t1) for s in spans]})
    out: Dict[str, float] = {}
    for a, b in zip(cuts, cuts[1:]):
        if b <= a:
            continue
        active = [s for s in spans if s.start <= a and s.end >= b]
        if active:
            st = stage_of(min(active, key=lambda s: _ORDER[s.stage]))
        else:
            later = [s for s in spans if s.start >= b]
            st = stage_of(min(later, key=lambda s: (s.start, _ORDER[s.stage]))) if later else "other"
        out[st] = out.get(st, 0.0) + (b - a)
    return out


def _busy(trace: Trace) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for s in trace.spans:
        out[s.stage] = out.get(s.stage, 0.0) + (s.end - s.start)
    return out


# ---------------------------------------------------------------------------
# rendering

def summary_rows(att: Dict[str, Any], base: str) -> List[List[Any]]:
    """Table rows: stage, stalls it was behind, seconds charged, share of the stall time."""
    total = sum(v["seconds"] for v in att["by_stage"].values()) or 0.0
    rows = []
    for st in STALL_STAGES:
        v = att["by_stage"][st]
        share = v["seconds"] / total if total > 0 else 0.0
        rows.append([st, H.Num(v["stalls_behind"], H.pointer(*_parts(base), "by_stage", st, "stalls_behind"), "d"),
                     H.Num(v["seconds"], H.pointer(*_parts(base), "by_stage", st, "seconds"), ".3f"),
                     f"{share:.1%}"])
    return rows


def _parts(base: str) -> List[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in base.split("/")[1:]] if base else []


def _window(trace: Trace, max_spans: int = 3000) -> Tuple[float, float]:
    """A window of the trace around its longest wait: about 8 waits, at most max_spans spans."""
    waits = _waits(trace)
    if not waits:
        lo = trace.spans[0].start if trace.spans else 0.0
        return lo, lo + 1.0
    k = max(range(len(waits)), key=lambda i: waits[i].end - waits[i].start)
    a, b = max(0, k - 4), min(len(waits) - 1, k + 4)
    lo, hi = waits[a].start, waits[b].end
    inside = [s for s in trace.spans if s.end >= lo and s.start <= hi]
    while len(inside) > max_spans and b > a + 1:
        b -= 1
        a = min(a + 1, b - 1)
        lo, hi = waits[a].start, waits[b].end
        inside = [s for s in trace.spans if s.end >= lo and s.start <= hi]
    return lo, hi


def timeline_svg(trace: Trace, steps: Optional[Sequence[Dict[str, float]]], offset: Optional[float],
                 chart_id: str = "timeline") -> Tuple[str, float, float]:
    lo, hi = _window(trace)
    lanes: List[Tuple[str, List[Tuple[float, float, str]]]] = []
    if steps and offset is not None:
        spans = []
        for s in steps:
            t = s["start"] + offset
            if t + s["total"] < lo or t > hi:
                continue
            for key, title in (("data_wait", "data wait"), ("h2d", "host-to-device"),
                               ("forward_backward", "forward/backward"), ("optimizer", "optimizer")):
                spans.append((t - lo, t + s[key] - lo, title))
                t += s[key]
        lanes.append(("trainer step", spans))
    tids = sorted({s.tid for s in trace.spans})
    names = [trace.threads.get(tid, f"thread-{tid}") for tid in tids]
    for tid, name in zip(tids, names):
        spans = [(max(s.start, lo) - lo, min(s.end, hi) - lo, s.stage) for s in trace.spans
                 if s.tid == tid and s.end >= lo and s.start <= hi]
        if spans:  # each epoch's run has threads of its own: same names, other thread numbers
            lanes.append((name if names.count(name) == 1 else f"{name} ({tid})", spans))
    colors = dict(STAGE_COLORS)
    if steps and offset is not None:
        colors.update(STEP_COLORS)
    colors = {k: v for k, v in colors.items() if any(c == k for _, sp in lanes for _, _, c in sp)}
    svg = H.timeline(f"Timeline around the longest wait ({hi - lo:.3f} s of the run)", lanes, colors,
                     x_label="seconds from the window's start", chart_id=chart_id)
    return svg, lo, hi


def section_html(trace: Trace, steps: Optional[Sequence[Dict[str, float]]], att: Dict[str, Any],
                 base: str = "", title: str = "Where the time goes", chart_prefix: str = "stalls") -> str:
    """The report's page as one HTML section (embedded in the experiments' reports); numbers point
    into the attribution at JSON Pointer `base`."""
    p = _parts(base)
    rows = summary_rows(att, base)
    total_stalls = att["stalls"]
    bars = H.bar_chart("Consumer wait charged to each stage", list(STALL_STAGES),
                       [H.Series("seconds", [att["by_stage"][st]["seconds"] for st in STALL_STAGES],
                                 [H.pointer(*p, "by_stage", st, "seconds") for st in STALL_STAGES])],
                       y_label="seconds", x_label="stage that held the batch back",
                       chart_id=f"{chart_prefix}-by-stage", category_colors=[STAGE_COLORS[s] for s in STALL_STAGES])
    svg, lo, hi = timeline_svg(trace, steps, att.get("step_offset_seconds"), chart_id=f"{chart_prefix}-timeline")
    longest = [[H.Num(s["batch"], H.pointer(*p, "longest", i, "batch"), "d"),
                H.Num(s["seconds"], H.pointer(*p, "longest", i, "seconds"), ".4f"), s["behind"],
                ", ".join(f"{k} {v:.4f}" for k, v in sorted(s["by_stage"].items(), key=lambda kv: -kv[1]))]
               for i, s in enumerate(att["longest"])]
    facts = [
        ["consumer waits", H.Num(att["waits"], H.pointer(*p, "waits"), "d")],
        ["time waited (s)", H.Num(att["wait_seconds"], H.pointer(*p, "wait_seconds"), ".3f")],
        [f"stalls (waits of at least {att['min_stall_seconds'] * 1e3:g} ms)", H.Num(total_stalls, H.pointer(*p, "stalls"), "d")],
        ["time stalled (s)", H.Num(att["stall_seconds"], H.pointer(*p, "stall_seconds"), ".3f")],
    ]
    if att.get("trainer_data_wait_seconds") is not None:
        facts.append(["trainer's data wait (s), Python included",
                      H.Num(att["trainer_data_wait_seconds"], H.pointer(*p, "trainer_data_wait_seconds"), ".3f")])
    busy = [[st, H.Num(v, H.pointer(*p, "busy_seconds", st), ".3f")] for st, v in sorted(att["busy_seconds"].items())]
    busy_note = ("Busy time per stage: the sum of its spans over all threads. Fetch spans run from a read's "
                 "submission to its completion and overlap (many reads are in flight), so fetch can exceed the run's time.")
    return H.section(
        title,
        H.paragraph("For every consumer wait the loader recorded, the stage that held its batch back: at each "
                    "instant of the wait, the earliest pipeline stage (fetch, decode, transform, collate) still "
                    "working on that batch, or, when none was, the stage it was queued for next. Host-to-device "
                    "copies come from the trainer's step timings. 'other': nothing of the batch ran then or later."),
        H.table(["", "value"], facts, caption="Waits"),
        H.table(["stage", "stalls it was behind", "seconds charged", "share"], rows, caption="Stall attribution"),
        bars,
        svg,
        H.table(["batch", "wait (s)", "behind", "seconds by stage"], longest, caption="Longest stalls"),
        H.table(["stage", "seconds"], busy, caption="Busy time per stage"),
        H.paragraph(busy_note),
        id=chart_prefix,
    )


def text_summary(att: Dict[str, Any]) -> str:
    total = sum(v["seconds"] for v in att["by_stage"].values()) or 0.0
    rows = [[st, att["by_stage"][st]["stalls_behind"], f"{att['by_stage'][st]['seconds']:.3f}",
             f"{(att['by_stage'][st]['seconds'] / total if total else 0):.1%}"] for st in STALL_STAGES]
    head = (f"{att['waits']} consumer waits, {att['wait_seconds']:.3f} s; {att['stalls']} stalls of at least "
            f"{att['min_stall_seconds'] * 1e3:g} ms, {att['stall_seconds']:.3f} s")
    return head + "\n" + text_table(["stage", "stalls behind", "seconds", "share"], rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m stoke.report", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("trace", help="the loader's Chrome trace (Loader.trace(path), stoke bench load --trace)")
    p.add_argument("--steps", help="the trainer's step log (JSON), for the trainer's lane and copies")
    p.add_argument("--out", required=True, help="the HTML report to write")
    p.add_argument("--json", help="also write the attribution as JSON here")
    p.add_argument("--min-stall-ms", type=float, default=1.0, help="shorter waits are not stalls (default 1)")
    args = p.parse_args(argv)
    try:
        trace = load_trace(args.trace)
        steps = load_steps(args.steps) if args.steps else None
    except ReportError as e:
        print(f"stoke.report: {e}", file=sys.stderr)
        return 2
    att = attribute_stalls(trace, steps, min_stall=args.min_stall_ms / 1e3)
    doc = {"trace": args.trace, "steps": args.steps, "attribution": att}
    page = H.page(f"stoke: where the time goes — {Path(args.trace).name}",
                  f"trace {args.trace}" + (f", steps {args.steps}" if args.steps else ""),
                  [section_html(trace, steps, att, base="/attribution")])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(page, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(text_summary(att))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
