"""`/runs/<run>`: one run's settings, every metric as a chart, heat and pauses, the log tail, data,
replay fidelity and tracker links.

Charts are the pages' own: one `ledger.pages.comparepage.run_chart` per metric (the compare
page's chart with this run alone), in the compare page's groups by prefix, and the heat plot of
`ledger heat --html` (`ledger.pages.heatpage.heat_chart`) with its text summary. Every value from
the record is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from ledger.heat.summary import render_heat_summary
from ledger.manifest import duration_text
from ledger.pages.answer import tracker_html
from ledger.pages.comparepage import CompareRun, metric_group, metric_names, run_chart
from ledger.pages.heatpage import heat_chart
from ledger.pages.svg import render
from ledger.textfmt import show_value
from ledger.ui.layout import info_html, run_href
from ledger.ui.runview import RunView


def _state_text(view: RunView) -> str:
    """`finished`, or a running run's current step: `running: step 3`."""
    if view.state == "orphaned":
        return "orphaned"
    if not view.running:
        fidelity = ((view.manifest.get("replay") or {}).get("fidelity") or {}).get("verdict")
        return f"{view.state} (replay: {fidelity})" if view.manifest.get("replay_of") and fidelity else view.state
    return "running" if view.step is None else f"running: step {view.step}"


def _facts(view: RunView) -> str:
    m = view.manifest
    status = m.get("status") or {}
    state = _state_text(view)
    if view.running and view.last_step_at:
        state += f" (logged {view.last_step_at})"
    duration = status.get("duration_s")
    command = m.get("command") or {}
    code = m.get("code") or {}
    image = m.get("image") or {}
    rows: list[tuple[str, str]] = [
        ("id", view.id),
        ("state", state),
        ("exit code", "-" if status.get("exit_code") is None else str(status.get("exit_code"))),
        ("started", str(m.get("started") or "-")),
        ("finished", str(m.get("finished") or "-")),
        ("duration", duration_text(duration) if isinstance(duration, (int, float)) else "-"),
        ("tags", " ".join(view.tags) or "-"),
        ("command", " ".join(str(a) for a in command.get("argv") or []) or "-"),
        ("code", f"{code.get('commit') or '-'} on {code.get('branch') or '-'}" + (" (uncommitted changes)" if code.get("dirty") else "")),
        ("image", str(image.get("ref") or image.get("source") or "-")),
    ]
    cells = "".join(f'<tr><th>{escape(k)}</th><td data-fact="{escape(k)}">{escape(v)}</td></tr>' for k, v in rows)
    note = f'<tr><th>note</th><td data-fact="note" class="note-text">{escape(view.note)}</td></tr>' if view.note else ""
    return f'<table class="facts">{cells}{note}</table>'


def _settings(view: RunView) -> str:
    settings = view.manifest.get("settings") or {}
    if not settings:
        return "<p>no settings recorded</p>"
    rows = "".join(
        f'<tr data-setting="{escape(str(k))}"><th>{escape(str(k))}</th><td>{escape(show_value(v, 120))}</td></tr>'
        for k, v in sorted(settings.items())
    )
    return f'<details open><summary>{len(settings)} settings</summary><table class="settings">{rows}</table></details>'


def _charts(view: RunView) -> str:
    label = str(view.manifest.get("name") or view.id)
    runs = [CompareRun(label, view.id, {}, view.table)]
    names = metric_names(runs)
    if not names:
        return "<p>no per-step metrics logged" + (" yet" if view.running else "") + "</p>"
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(metric_group(name), []).append(name)
    out = []
    for group, members in groups.items():
        # one line per chart (this run): no legend, three charts a row on a wide screen
        charts = "".join(render(run_chart(m, runs), width=440, height=220, legend_width=0) for m in members)
        out.append(
            f'<details open data-group="{escape(group)}"><summary>{escape(group)}/ ({len(members)})</summary>'
            f'<div class="charts">{charts}</div></details>'
        )
    return "\n".join(out)


def _pauses(gpu: Mapping[str, Any]) -> str:
    if gpu.get("pauses") is None:
        return ""
    paused = gpu.get("paused_s")
    seconds = f" ({paused:.1f} s in all)" if isinstance(paused, (int, float)) else ""
    return f'<p data-kind="pauses">heat pauses: {escape(str(gpu.get("pauses")))}{escape(seconds)}</p>'


def _heat(view: RunView) -> str:
    gpu = view.manifest.get("gpu") or {}
    gpu = gpu if isinstance(gpu, dict) else {}
    head = _pauses(gpu)
    if view.heat is None:
        why = gpu.get("unavailable") or ("no samples yet" if view.running else "GPU sampling was off")
        return head + f"<p>no heat log ({escape(str(why))})</p>"
    table = view.table
    steps = sorted((row.step, row.t_end) for row in table.rows.values() if row.t_end is not None) if table else []
    chart = render(heat_chart(view.heat, steps or None), width=900, height=300)
    summary = render_heat_summary(view.heat, steps or None)
    return head + f'<div class="side"><div>{chart}</div><pre class="heat">{escape(summary)}</pre></div>'


def _data(view: RunView) -> str:
    entries = view.manifest.get("data") or []
    if not isinstance(entries, list) or not entries:
        return "<p>no DVC-tracked data</p>"
    keys = ("role", "path", "hash", "nfiles", "size", "tracked", "error")
    head = "".join(f"<th>{k}</th>" for k in keys)
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(show_value(e.get(k), 80))}</td>" for k in keys) + "</tr>" for e in entries if isinstance(e, dict)
    )
    return f'<table class="data" data-kind="data"><tr>{head}</tr>{rows}</table>'


def _replay(view: RunView) -> str:
    source = view.manifest.get("replay_of")
    if not source:
        return "<p>not a replay</p>"
    replay = view.manifest.get("replay") or {}
    fidelity = replay.get("fidelity") if isinstance(replay, dict) else None
    out = f'<p>a replay of <a href="{escape(run_href(str(source)))}">{escape(str(source))}</a></p>'
    if isinstance(fidelity, dict):
        rows = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(show_value(v, 160))}</td></tr>" for k, v in fidelity.items())
        out += f'<table class="fidelity" data-kind="fidelity">{rows}</table>'
    else:
        out += "<p>fidelity: not judged (yet)</p>"
    return out


def run_live(view: RunView) -> str:
    """The live part of a run's page (all of it: a running run changes everywhere)."""
    title = str(view.manifest.get("name") or view.id)
    tail = "".join(escape(line) for line in view.log_tail) or "(nothing logged yet)"
    trackers = tracker_html(view.manifest) or "none"
    return "\n".join(
        [
            f'<h1 data-kind="run" data-state="{escape(view.state)}">{escape(title)} '
            f'<span class="state-{escape(view.state)}">{escape(_state_text(view))}</span></h1>',
            *(info_html(n) for n in view.notes),
            _facts(view),
            f"<h2>settings</h2>{_settings(view)}",
            f"<h2>metrics</h2>{_charts(view)}",
            f"<h2>heat and pauses</h2>{_heat(view)}",
            f'<h2>log tail (trainer)</h2><pre class="log" data-kind="log">{tail}</pre>',
            f"<h2>data</h2>{_data(view)}",
            f"<h2>replay fidelity</h2>{_replay(view)}",
            f'<h2>trackers</h2><p data-kind="trackers">{trackers}</p>',
        ]
    )
