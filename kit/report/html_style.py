"""report.html's look: its style sheet, and the policy that lets the page load nothing."""

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; color: #1b1b1b; margin: 0; background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 1.5em 1.2em 4em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ddd; } div.table { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.8em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.55em; vertical-align: top; }
th { background: #f3f3f3; } td.logs { font-size: 0.9em; min-width: 9em; }
figure { margin: 1.2em 0 2em; } figure img { max-width: 100%; border: 1px solid #e4e4e4; }
figcaption, pre { font-size: 0.85em; } pre { background: #f6f6f6; padding: 0.8em; }
pre { overflow-x: auto; } p.note { color: #444; font-style: italic; }
h1 { font-size: 1.6em; margin: 0.2em 0 0.6em; } #summary { margin-top: 0.6em; }
div.summary table { border: 2px solid #1f5f99; font-size: 0.95em; }
div.summary th { background: #dbe8f5; }
details { margin: 1em 0; border: 1px solid #ddd; padding: 0.3em 0.8em; }
details > summary { cursor: pointer; font-weight: 600; }
"""
# the summary's own colours (its header #dbe8f5, its frame #1f5f99): the page's Chromium test
# finds them in a 1280×800 screenshot, so it sees the summary before any scrolling

# nothing but the page itself, inline style and data: images may load (it opens offline)
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
