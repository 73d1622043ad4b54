"""The report's opening: which tool or layout to pick for which need, and the headline ratios, read from
the studies' own tables (so it says only what the run measured)."""

from __future__ import annotations

import html

CUBESLAB = ("cubeslab", "cubeslab + views")


def median(cell) -> float | None:
    """The median of a table cell: ``12.3 (11–14)`` → 12.3; ``—`` → None."""
    if isinstance(cell, (int, float)):
        return float(cell)
    try:
        return float(str(cell).split()[0].rstrip("x"))
    except (ValueError, IndexError):
        return None


def medians(cells: dict) -> dict[str, float]:
    """The cells' medians, by key, without the cells that hold none."""
    found = {key: median(cell) for key, cell in cells.items()}
    return {key: value for key, value in found.items() if value is not None}


def _table(doc: dict, prefix: str) -> dict | None:
    return next((t for t in doc["tables"] if t["title"].startswith(prefix)), None)


def fastest_row(need: str, ours: dict[str, float], others: dict[str, float]) -> list[str]:
    """A summary row from times (ms) by tool: the pick, cubeslab's best, the fastest other tool, and
    the other's time over cubeslab's."""
    best_ours, best_other = min(ours, key=ours.__getitem__), min(others, key=others.__getitem__)
    ratio = others[best_other] / ours[best_ours]
    return [
        need,
        best_ours if ratio >= 1 else best_other,
        f"{best_ours} {ours[best_ours]:.3g} ms",
        f"{best_other} {others[best_other]:.3g} ms",
        f"{ratio:.2g}x",
    ]


def _fold(ratios: list[float]) -> str:
    low, high = min(ratios), max(ratios)
    return f"{low:.2g}x" if low == high else f"{low:.2g}–{high:.2g}x"


def seismic_reads(doc: dict) -> list[list[str]]:
    """Per cache state: cubeslab's best (volume or views) against the fastest other tool, per access. A
    tool that keeps decoded data in its own process is left out of the warm rows (it answers repeats
    from memory, which is another measurement), as the study's own ratios leave it out."""
    tools_found = doc.get("results", {}).get("tools", {})
    own_cache = {t for t, e in tools_found.items() if e.get("own_cache")}
    rows = []
    for state in ("warm", "cold"):
        table = _table(doc, f"Reads, {state}")
        if table is None:
            continue
        columns = table["columns"]
        tools = [c for c in columns if c not in ("access", "bound") and "÷" not in c]
        for row in table["rows"]:
            times = medians({t: row[columns.index(t)] for t in tools})
            ours = {t: v for t, v in times.items() if t in CUBESLAB}
            others = {
                t: v
                for t, v in times.items()
                if t not in CUBESLAB and not (state == "warm" and t in own_cache)
            }
            if not ours or not others:
                continue
            rows.append(fastest_row(f"{row[0]} of a 3-D survey, {state}", ours, others))
    return rows


def seismic_ingest(doc: dict) -> list[list[str]]:
    """cubeslab's ingest rate against the fastest other SEG-Y converter, and what views cost on disk."""
    table = _table(doc, "Ingest and size")
    if table is None:
        return []
    columns = table["columns"]
    by_tool = {r[0]: r for r in table["rows"]}
    rate = {t: median(r[columns.index("MB/s of SEG-Y")]) for t, r in by_tool.items()}
    converters = {
        t: v
        for t, v in rate.items()
        if v is not None
        and t not in CUBESLAB
        and "from SEG-Y" not in str(by_tool[t][1])
        and not str(by_tool[t][1]).startswith("written from memory")
    }
    ours = rate.get("cubeslab")
    if ours is None or not converters:
        return []
    best = max(converters, key=converters.__getitem__)
    out = [
        [
            "SEG-Y to a sliceable store (ingest)",
            "cubeslab" if ours >= converters[best] else best,
            f"cubeslab {ours:.0f} MB/s",
            f"{best} {converters[best]:.0f} MB/s",
            f"{ours / converters[best]:.2g}x",
        ]
    ]
    size = medians({t: r[columns.index("÷ raw volume")] for t, r in by_tool.items()})
    if size.get("cubeslab + views") is not None and size.get("cubeslab") is not None:
        out.append(
            [
                "disk taken (÷ the raw volume)",
                "views where reads matter more than disk",
                f"cubeslab {size['cubeslab']:.2g}x, with views {size['cubeslab + views']:.2g}x",
                "—",
                "—",
            ]
        )
    return out


def msi_selections(doc: dict) -> list[list[str]]:
    table = _table(doc, "Selections, sustained")
    if table is None:
        return []
    columns = table["columns"]
    rows = []
    for access in ("z-slices", "spectra", "subcube"):
        column = columns.index(f"{access} ms")
        times = medians({r[0]: r[column] for r in table["rows"]})
        ours = {t: v for t, v in times.items() if t.startswith("cubeslab")}
        others = {t: v for t, v in times.items() if not t.startswith("cubeslab")}
        if not ours or not others:
            continue
        rows.append(fastest_row(f"MSI {access}, warm", ours, others))
    return rows


def layout_formula(doc: dict) -> list[list[str]]:
    table = _table(doc, "The published formula's pick")
    if table is None:
        return []
    columns = table["columns"]
    slowest = medians({r[0]: r[columns.index("slowest cold")] for r in table["rows"]})
    planner = next((t for t in slowest if "planner" in t), None)
    formula = next((t for t in slowest if "published formula" in t and t.startswith("cubeslab")), None)
    if planner is None or formula is None or not slowest[planner]:
        return []
    return [
        [
            "chunk shape for planes of every orientation (slowest plane, cold)",
            "--layout auto (the planner)",
            f"planner {slowest[planner]:.3g} ms",
            f"Pyrus formula {slowest[formula]:.3g} ms",
            f"{slowest[formula] / slowest[planner]:.2g}x",
        ]
    ]


def hdf5_formats(doc: dict) -> list[list[str]]:
    """The formats study's own summary: cubeslab's time ÷ HDF5's, for writes and whole reads."""
    table = _table(doc, "Published conclusions")
    if table is None:
        return []
    ours = str(table["rows"][0][-1])  # "write: cubeslab 1.6–3.2x; read: cubeslab 0.85–2x"
    out = []
    for part in ours.split(";"):
        what, _, span = part.partition(": cubeslab ")
        numbers = list(medians(dict(enumerate(span.replace("x", "").split("–")))).values())
        if not what.strip() or not numbers:
            continue
        slower = min(numbers) > 1  # cubeslab's time over HDF5's
        out.append(
            [
                f"whole N-D datasets, {what.strip()} (formats study)",
                "HDF5 (h5py)" if slower else "cubeslab",
                f"cubeslab time ÷ HDF5's: {span.strip()}",
                "HDF5",
                "—",
            ]
        )
    return out


SECTIONS = {
    "peers": (seismic_ingest, seismic_reads),
    "pyrus": (layout_formula,),
    "openmsi": (msi_selections,),
    "formats": (hdf5_formats,),
}


def rows(docs: list[dict]) -> list[list[str]]:
    out = []
    for doc in docs:
        for section in SECTIONS.get(doc["study"], ()):
            out += section(doc)
    return out


def _own_cache(docs: list[dict]) -> set[str]:
    return {
        t
        for d in docs
        for t, e in d.get("results", {}).get("tools", {}).items()
        if isinstance(e, dict) and e.get("own_cache")
    }


def render(docs: list[dict]) -> str:
    """The summary as HTML: a sentence on how to read it, the table, and the picks in words."""
    found = rows(docs)
    if not found:
        return ""
    head = "".join(
        f"<th>{c}</th>"
        for c in ("need", "pick", "cubeslab's best here", "fastest other tool", "other ÷ cubeslab")
    )
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r) + "</tr>" for r in found)
    reads = [r for r in found if r[0].endswith(("warm", "cold")) and "MSI" not in r[0]]
    won = sum(1 for r in reads if r[1] in CUBESLAB)
    views = sum(1 for r in reads if r[1] == "cubeslab + views")
    ratios = [median(r[4]) for r in reads if r[1] in CUBESLAB and median(r[4])]
    words = []
    if reads:
        words.append(
            f"Seismic reads: cubeslab is fastest in {won} of {len(reads)} access and cache cases measured, "
            f"{views} of them with orientation views"
            + (f", by {_fold([x for x in ratios if x])} over the fastest other tool" if ratios else "")
            + "; where another tool wins, its row names it. Warm rows leave out tools that keep decoded "
            "data in their own process (" + (", ".join(sorted(_own_cache(docs))) or "none here") + ")."
        )
    return (
        '<section id="summary"><h2>Summary: what to pick</h2>'
        '<p class="note">Medians from the studies below (this run); the ratio is the other tool\'s time '
        "÷ cubeslab's (above 1: cubeslab is faster).</p>"
        + "".join(f'<p class="note"><b>{html.escape(w)}</b></p>' for w in words)
        + f'<table class="summary"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>'
    )
