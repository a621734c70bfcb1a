"""Plain-text tables for the terminal, shared by the experiments and stoke.report (a module of its
own, so that neither imports the other for it)."""

from __future__ import annotations

from typing import Any, Sequence


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> str:
    """A plain-text table for the terminal (numbers right-aligned)."""
    cells = [[str(h) for h in headers]] + [["–" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(_looks_numeric(r[i]) for r in cells[1:]) for i in range(len(headers))]

    def fmt(r: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(r, widths, numeric)).rstrip()

    lines = ([title] if title else []) + [fmt(cells[0]), "  ".join("-" * w for w in widths)] + [fmt(r) for r in cells[1:]]
    return "\n".join(lines)


def _looks_numeric(s: str) -> bool:
    s = s.replace(",", "").rstrip("%x").strip()
    if s in ("–", ""):
        return True
    try:
        float(s)
        return True
    except ValueError:
        return False
