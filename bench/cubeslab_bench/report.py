"""One self-contained HTML report (tables, plots embedded, the machine) from the studies' JSON files.

The report holds only what the JSON files in its folder hold: every measured figure comes from the run
recorded there; published figures are shown only in tables labelled with their source document.
"""

from __future__ import annotations

import base64
import html
import json
import time
from pathlib import Path

from . import machine as machine_info
from . import summary

COLD_METHOD = (
    "Cold: before each timed run every file of the tool's data is evicted from the page cache with "
    "posix_fadvise(POSIX_FADV_DONTNEED) and the tool's handle is opened afresh. Warm: the data was read "
    "once before timing. Each figure is the median of the runs shown, with min–max in brackets."
)

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1180px; color: #1d2330; }
h1 { font-size: 1.7em; } h2 { border-bottom: 2px solid #345; padding-bottom: .2em; margin-top: 2.2em; }
h3 { font-size: 1.05em; margin: 1.4em 0 .4em; }
table { border-collapse: collapse; margin: .4em 0 1em; font-size: 12.5px; }
th, td { border: 1px solid #c8ced8; padding: 3px 7px; text-align: right; }
th { background: #e8edf4; } td:first-child, th:first-child { text-align: left; }
table.published th { background: #f4ecd8; } .published-label { color: #8a5a00; font-weight: 600; }
.meta { color: #556; } .note { color: #334; max-width: 70em; } figure { margin: 1em 0; }
figcaption { color: #445; font-size: 12.5px; max-width: 70em; } img { max-width: 100%; }
.skipped { color: #844; }
"""


RENDER_CHECK = """<script>
// Records, on the page, how many plots the browser decoded: a headless check reads it back.
window.addEventListener("load", () => {
  const images = [...document.images];
  document.body.dataset.plotsDecoded = images.filter(i => i.complete && i.naturalWidth > 0).length;
  document.body.dataset.plots = images.length;
});
</script>"""


def _cell(value) -> str:
    if isinstance(value, float):
        value = f"{value:.4g}"
    return html.escape("—" if value is None else str(value))


def _table(table: dict, study: str) -> str:
    published = table.get("published")
    cls = "published" if published else "measured"
    label = (
        f'<div class="published-label">Published figures, not measured here: {html.escape(published)}</div>'
        if published
        else ""
    )
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table["columns"])
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in table["rows"])
    note = f'<p class="note">{html.escape(table["note"])}</p>' if table.get("note") else ""
    return (
        f"<h3>{html.escape(table['title'])}</h3>{label}"
        f'<table class="{cls}" data-study="{html.escape(study)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>{note}"
    )


def _plot(folder: Path, plot: dict) -> str:
    path = folder / plot["file"]
    if not path.is_file():
        return f'<p class="skipped">plot {html.escape(plot["file"])} is missing</p>'
    data = base64.b64encode(path.read_bytes()).decode()
    caption = html.escape(plot["caption"])
    image = f'<img alt="{caption}" src="data:image/png;base64,{data}">'
    return f"<figure>{image}<figcaption>{caption}</figcaption></figure>"


def _bandwidth(bandwidth: dict) -> str:
    parts = []
    if "memory_copy_Bps" in bandwidth:
        parts.append(f"memory copy {bandwidth['memory_copy_Bps'] / 1e9:.1f} GB/s (one thread)")
    if "disk_read_Bps" in bandwidth:
        parts.append(f"sequential disk read {bandwidth['disk_read_Bps'] / 1e9:.2f} GB/s (cold, 16 MiB reads)")
    if "disk_write_Bps" in bandwidth:
        parts.append(f"sequential disk write {bandwidth['disk_write_Bps'] / 1e9:.2f} GB/s (fsynced)")
    if not parts:
        return ""
    return (
        '<p class="meta">Physical bounds measured in this run: '
        + "; ".join(parts)
        + ". A bound is the bytes that must move divided by that bandwidth (memory for warm, disk for "
        "cold).</p>"
    )


def _study(folder: Path, doc: dict) -> str:
    name = doc["study"]
    out = [
        f'<section id="{html.escape(name)}"><h2>{html.escape(doc["title"])} <small>(<code>cubeslab bench '
        f"{html.escape(name)} --size {html.escape(doc['size'])}</code>)</small></h2>",
        f'<p class="meta">Reproduces {html.escape(doc["references"])}. Run {html.escape(doc["started"])}, '
        f"{doc['seconds']:.0f} s, on {html.escape(machine_info.summary(doc['machine']))}.</p>",
        _bandwidth(doc.get("bandwidth", {})),
    ]
    out += [f'<p class="note">{html.escape(n)}</p>' for n in doc.get("notes", [])]
    out += [_table(t, name) for t in doc["tables"]]
    out += [_plot(folder, p) for p in doc["plots"]]
    if doc.get("skipped"):
        items = "".join(
            f"<li><b>{html.escape(tool)}</b>: {html.escape(why)}</li>" for tool, why in doc["skipped"].items()
        )
        out.append(f'<h3>Skipped</h3><ul class="skipped">{items}</ul>')
    out.append("</section>")
    return "\n".join(out)


def _machine(doc: dict) -> str:
    m = doc["machine"]
    disk = m["disk"]
    rows = [
        ("CPU", f"{m['cpu']} ({m['cores']} cores available)"),
        ("Memory", f"{m['memory_gib']} GiB"),
        ("Platform", m["platform"]),
        ("Python", m["python"]),
        ("Disk", ", ".join(f"{k} {v}" for k, v in disk.items() if v is not None)),
        ("Versions", ", ".join(f"{k} {v}" for k, v in m["versions"].items())),
    ]
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    return f'<h2 id="machine">Machine</h2><table class="machine">{body}</table>'


def build(folder: Path, order: list[str]) -> Path:
    """Write ``folder/report.html`` from the study files there (in ``order``); returns its path."""
    folder = Path(folder)
    docs = []
    for name in order:
        path = folder / f"{name}.json"
        if path.is_file():
            docs.append(json.loads(path.read_text()))
    if not docs:
        raise FileNotFoundError(f"{folder}: no study results (*.json) to report")
    contents = "".join(f'<li><a href="#{d["study"]}">{html.escape(d["title"])}</a></li>' for d in docs)
    page = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>cubeslab benchmark report</title><style>{STYLE}</style></head><body>",
        "<h1>cubeslab benchmark report</h1>",
        f'<p class="meta">Built {time.strftime("%Y-%m-%d %H:%M:%S %Z")} from {len(docs)} study run(s) '
        f"in this folder. {html.escape(COLD_METHOD)}</p>",
        f"<ul><li><a href='#summary'>Summary: what to pick</a></li>{contents}"
        "<li><a href='#machine'>Machine</a></li></ul>",
        summary.render(docs),
        *(_study(folder, d) for d in docs),
        _machine(docs[-1]),
        RENDER_CHECK,
        "</body></html>",
    ]
    target = folder / "report.html"
    tmp = target.with_suffix(".html.tmp")
    tmp.write_text("\n".join(page))
    tmp.replace(target)
    return target
