"""The page shell shared by every report page: styles, escaping, sections."""

from __future__ import annotations

import html

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1200px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; }
.pass { color: #1a7f37; font-weight: bold; } .fail { color: #cf222e; font-weight: bold; }
.integer { background: #dafbe1; } .fallback { background: #fff8c5; }
.float { background: #ddf4ff; } .unsupported { background: #ffebe9; }
.chart { display: inline-block; margin: 0 1em 1em 0; vertical-align: top; }
.graph { overflow: auto; border: 1px solid #ddd; max-height: 900px; }
.legend span { display: inline-block; padding: 0 0.6em; margin-right: 0.4em; }
"""


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def page(title: str, body: list[str]) -> str:
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        *body,
        "</body></html>",
        "",
    ])


def table(headers: list[str], rows: list[list[str]], row_classes: list[str] | None = None,
          ) -> str:
    """An HTML table; cells are already-escaped HTML."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    lines = [f"<table><thead><tr>{head}</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        css = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        lines.append(f"<tr{css}>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)
