"""The built book as a reader meets it: every page opened in a real headless browser, offline.

The site in ``_build/html`` is served on localhost and opened in Chromium (Debian's ``chromium``
package, driven by pip's ``playwright``; ``bash .ci/tasks.sh setup`` installs both). Every request
that leaves localhost is aborted, so a page that needs the network (a CDN's MathJax, a web font)
fails here. On every page, at a desktop width (1280 px) and a phone width (390 px):

- no console error, no uncaught exception, no failed request, no HTTP error;
- every formula is typeset by MathJax (no raw ``\\(`` left, no MathJax error);
- every image loads and has alt text that describes it (not a file name);
- every link to another page or file of the site leads to a file that exists;
- the page shows what its sources and cells meant, with no symbol swallowed: no HTML element the
  page never meant (an angle-bracket token such as ``<s>``, ``</s>`` or ``<unk>`` that a Markdown
  caption or a cell's HTML output left unescaped, which the browser turns into markup: ``<s>``
  strikes the rest of a table row through, ``</s>`` vanishes), checked both in the served HTML and
  in the browser's document; no Markdown table left as raw pipes (``| a | b |``, ``|---|``);
  no option of a shown command turned into a dash (``–config`` for ``--config``: such a command
  does not run when copied);
- no inline formula is wider than the viewport (MathJax 3 does not break lines, so a long inline
  formula runs off a phone's screen);
- the page does not scroll sideways; at 1280 px no display equation needs scrolling either (at
  390 px a wide one scrolls inside its own box), and the code of every cell fits the column (an
  output may scroll inside its cell); a chapter with code cells offers its notebook (``.ipynb``)
  for download, and shows no check (``assert``, ``keep(...)``) in a cell's code: those are folded
  under "show the checks"; these are checked on the chapters in ``book/``, not on the exercise
  notebooks, which are shown as nbgrader generates them;

and the search page finds a chapter's term. When the browser cannot be started the tests are
skipped with the reason (pytest's ``-ra`` prints it), never passed silently.

Set ``NLPCOURSE_SCREENSHOTS`` to a folder to save a full-page screenshot of every page there.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import os
import re
import threading
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # without these, the closed network refuses connections
    "--disable-component-update",
    "--disable-sync",
]
WIDTHS = {"desktop": 1280, "phone": 390}
# pages that are not part of the reading: redirects, Sphinx's own search page (tested apart)
SKIP_PAGES = {"search.html"}

REPO = Path(__file__).resolve().parent.parent

# The elements of HTML5 that may appear in a page (Sphinx, the theme, myst-nb, pandas, matplotlib).
# Anything else in the served HTML, and the text-level elements the book's sources never ask for
# (strikethrough and friends: MyST's strikethrough extension is off), is a symbol swallowed into
# markup: ``<s>`` from an unescaped pandas Styler cell, ``</s>`` from a Markdown caption.
HTML_ELEMENTS = set(
    """a abbr address article aside audio b base bdi bdo blockquote body br button canvas caption
    cite code col colgroup data datalist dd details dfn dialog div dl dt em embed fieldset
    figcaption figure footer form h1 h2 h3 h4 h5 h6 head header hgroup hr html i iframe img input
    kbd label legend li link main map mark meta meter nav noscript object ol optgroup option output
    p param picture pre progress q rp rt ruby samp script search section select slot small source
    span strong style sub summary sup table tbody td template textarea tfoot th thead time title tr
    track ul var video wbr center svg path g defs use symbol circle rect line polyline polygon
    text tspan clippath lineargradient stop image""".split()
)
NEVER_MEANT = {"s", "strike", "del", "ins", "u", "blink"}


class TagCollector(html.parser.HTMLParser):
    """The start and end tags of a page's ``<main>``: ``[(tag, line, text around it)]``."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.source_lines = source.splitlines()
        self.tags: list[tuple[str, int, str]] = []
        self.feed(source)

    def record(self, tag: str, closing: bool) -> None:
        line, column = self.getpos()
        text = self.source_lines[line - 1][max(0, column - 40) : column + 40]
        self.tags.append((("/" if closing else "") + tag, line, text))

    def handle_starttag(self, tag, attrs) -> None:
        self.record(tag, False)

    def handle_endtag(self, tag) -> None:
        self.record(tag, True)


def swallowed_tags(source: str) -> list[str]:
    """The tags of a page's HTML that no page means: unknown elements and strikethrough."""
    if "<main" in source:
        source = source[source.index("<main") : source.rindex("</main>")]
    problems = []
    for tag, line, text in TagCollector(source).tags:
        name = tag.lstrip("/")
        if name in NEVER_MEANT or name not in HTML_ELEMENTS and "-" not in name:
            problems.append(f"an element the page never meant, <{tag}> (line {line}: {text!r})")
    return problems


def test_swallowed_tags_found():
    """The check finds the faults it is for, and passes what Sphinx and pandas write."""
    styler = '<main><td id="T_1_row0_col0">P_KN(am | <s>)</td></main>'
    caption = "<main><figcaption><p>rows are the phones (ending with </s>), columns</p></main>"
    fine = '<main><table><tr><td class="x">&lt;s&gt; I am</td></tr></table><mjx-c></mjx-c></main>'
    assert any("<s>" in p for p in swallowed_tags(styler))
    assert any("</s>" in p for p in swallowed_tags(caption))
    assert any("<unk>" in p for p in swallowed_tags("<main><p>a <unk> b</p></main>"))
    assert swallowed_tags(fine) == []


def sync_playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed: pip install -r requirements.txt")
    if not CHROMIUM.is_file():
        pytest.skip(
            "no browser: /usr/bin/chromium is missing (bash .ci/tasks.sh setup installs it with "
            "apt-get where it can; or run: sudo apt-get install chromium)"
        )
    return sync_playwright


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def site(book_build):
    """The built site served on a free localhost port: its base URL and its folder."""
    handler = functools.partial(QuietHandler, directory=str(book_build.html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", book_build.html
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    playwright_factory = sync_playwright()
    with playwright_factory() as p:
        try:
            chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        except Exception as error:  # noqa: BLE001 - a browser that cannot start is a skip reason
            pytest.skip(f"chromium does not start: {error}")
        yield chromium
        chromium.close()


def pages(html: Path) -> list[str]:
    """Every HTML page of the site, relative to its root."""
    found = []
    for path in sorted(html.rglob("*.html")):
        relative = path.relative_to(html).as_posix()
        if relative.split("/")[0] in {"_static", "_sources", "_images", "reports"}:
            continue
        if relative in SKIP_PAGES or 'http-equiv="Refresh"' in path.read_text()[:2000]:
            continue
        found.append(relative)
    return found


def offline_page(browser, width: int):
    """A new page at ``width`` px that may only talk to localhost, recording every problem."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(180_000)  # a loaded machine (the build beside it) is slow
    page = context.new_page()
    problems: list[str] = []

    def route(r) -> None:
        if re.match(r"https?://(127\.0\.0\.1|localhost)[:/]", r.request.url):
            r.continue_()
        else:
            problems.append(f"a request left the site: {r.request.url}")
            r.abort()

    page.route("**/*", route)
    page.on(
        "console",
        lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda e: problems.append(f"JavaScript error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} ({r.failure})"))
    page.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    return context, page, problems


# Everything measured in the page at once, after MathJax has finished typesetting.
INSPECT = """() => {
  const maths = [...document.querySelectorAll('.math')];
  const raw = maths.filter(m => !m.querySelector('mjx-container'))
                   .map(m => m.textContent.trim().slice(0, 60));
  const errors = [...document.querySelectorAll('mjx-merror')]
                   .map(e => e.getAttribute('data-mjx-error') || e.textContent.slice(0, 60));
  const text = document.querySelector('main') ? document.querySelector('main').innerText : '';
  const rawInText = (text.match(/\\\\\\(|\\\\\\[/g) || []).length;
  const images = [...document.querySelectorAll('main img')].map(img => ({
      src: img.getAttribute('src'), alt: img.getAttribute('alt') || '',
      loaded: img.complete && img.naturalWidth > 0}));
  const wide = (el) => el.scrollWidth > el.clientWidth + 1;
  const label = (el) => el.textContent.replace(/\\s+/g, ' ').trim().slice(0, 70);
  // a display equation is wider than its box when its box or MathJax's container inside scrolls
  const equations = [...document.querySelectorAll('div.math')]
      .filter(d => wide(d) || [...d.querySelectorAll('mjx-container')].some(wide)).map(label);
  const code = [...document.querySelectorAll('div.cell_input pre')]
                 .filter(wide).map(label);
  const links = [...document.querySelectorAll('a[href]')].map(a => a.href)
                   .filter(h => h.startsWith(location.origin));
  // an element the page never meant: strikethrough, or a tag HTML does not know (<unk>)
  const never = ['S', 'STRIKE', 'DEL', 'INS', 'U'];
  const swallowed = [...document.querySelectorAll('main *')]
      .filter(e => never.includes(e.tagName) || e instanceof HTMLUnknownElement)
      .map(e => `<${e.tagName.toLowerCase()}> around "${label(e.parentElement)}"`);
  // a Markdown table left as text: a paragraph or list item whose lines are | ... |
  const pipes = [...document.querySelectorAll('main p, main li, main td')]
      .filter(e => !e.closest('pre, code, .math'))
      .filter(e => /^\\s*\\|.*\\|.*\\|\\s*$/m.test(e.innerText)
                   || /\\|\\s*[-—–:]+\\s*\\|/.test(e.innerText))
      .map(label);
  // an option of a command turned into a dash by smart quotes ("–config"); not inside formulas
  const dashed = [...document.querySelectorAll('main p, main li, main td, main pre, main code')]
      .filter(e => !e.querySelector('p, li, td, pre') && !e.closest('.math'))
      .filter(e => /(^|\\s)[–—][A-Za-z]/.test(e.innerText)).map(label);
  // an inline formula wider than the screen: its right edge beyond the viewport
  // a check (assert, keep(...)) shown in a cell's code instead of folded under "show the checks"
  const checks = [...document.querySelectorAll('div.cell_input pre')]
      .filter(pre => !pre.closest('details.book-checks'))
      .flatMap(pre => pre.innerText.split('\\n'))
      .filter(line => /^\\s*(assert\\b|keep\\()/.test(line)).map(line => line.slice(0, 70));
  const cells = document.querySelectorAll('div.cell').length;
  const notebookLinks = [...document.querySelectorAll('a[href$=".ipynb"]')].length;
  // the entries of the page's download menu, by their text (".ipynb", ".md", ".pdf")
  const downloads = [...document.querySelectorAll('.dropdown-download-buttons .dropdown-item, '
                                                  + '.dropdown-download-buttons a')]
      .map(e => e.innerText.trim()).filter(t => t);
  const box = (m) => m.getBoundingClientRect();
  const inline = [...document.querySelectorAll('mjx-container:not([display="true"])')]
      .filter(m => !m.closest('div.math'))
      .filter(m => box(m).right > window.innerWidth + 1 || box(m).width > window.innerWidth)
      .map(m => `${Math.round(box(m).width)} px: ${label(m.closest('p, li, td') || m)}`);
  return {count: maths.length, raw, errors, rawInText, images, equations, code, links,
          swallowed, pipes, dashed, inline, checks, cells, notebookLinks, downloads,
          pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth};
}"""


def open_page(page, url: str) -> dict:
    page.goto(url, wait_until="load")
    page.wait_for_function("() => !window.MathJax || (MathJax.startup && MathJax.startup.promise)")
    page.evaluate("() => window.MathJax ? MathJax.startup.promise : null")
    return page.evaluate(INSPECT)


def site_problems(base: str, html: Path, browser, width_name: str) -> tuple[list[str], int]:
    """Every problem of every page of the site served at ``base`` from ``html``, at one width,
    and the number of formulas typeset. (Also run by hand on an older build, to show a fault.)"""
    width = WIDTHS[width_name]
    shots = os.environ.get("NLPCOURSE_SCREENSHOTS")
    failures = []
    typeset = 0
    for name in pages(html):
        context, page, problems = offline_page(browser, width)
        found = open_page(page, f"{base}/{name}")
        typeset += found["count"]
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
            shot = Path(shots) / f"{width_name}-{name.replace('/', '-')}.png"
            page.screenshot(path=str(shot), full_page=True)
        context.close()
        problems += [f"formula not typeset: {m}" for m in found["raw"]]
        problems += [f"MathJax error: {e}" for e in found["errors"]]
        if found["rawInText"]:
            problems.append(f"{found['rawInText']} raw \\( or \\[ left in the text")
        for image in found["images"]:
            if not image["loaded"]:
                problems.append(f"image does not load: {image['src']}")
            alt = image["alt"].strip()
            if len(alt) < 10 or re.fullmatch(r"[\w./-]+\.(png|svg|jpg)", alt):
                problems.append(f"image {image['src']} has no real alt text: {alt!r}")
        problems += [f"an element the page never meant: {e}" for e in found["swallowed"]]
        problems += [f"a Markdown table left as raw pipes: {p}" for p in found["pipes"]]
        problems += [f"a command's option turned into a dash: {d}" for d in found["dashed"]]
        problems += [f"an inline formula wider than the screen, {f}" for f in found["inline"]]
        offered = sorted(set(found["downloads"]))
        twice = [entry for entry in offered if found["downloads"].count(entry) > 1]
        problems += [f"the download menu lists {entry} twice" for entry in twice]
        if found["pageWidth"] > found["viewport"]:
            wide = found["pageWidth"]
            problems.append(f"the page scrolls sideways: {wide} px wide in {width} px")
        if width_name == "desktop":
            problems += swallowed_tags((html / name).read_text())
            for link in found["links"]:
                target = link[len(base) + 1 :].split("#")[0].split("?")[0]
                if not (html / target).is_file() and not (html / target / "index.html").is_file():
                    problems.append(f"broken link: {link}")
            if name.startswith("book/"):  # the exercises are shown as nbgrader makes them
                problems += [
                    f"display equation wider than the column: {e}" for e in found["equations"]
                ]
                problems += [f"code cell wider than the column: {c}" for c in found["code"]]
                problems += [
                    f"a check not folded under 'show the checks': {c}" for c in found["checks"]
                ]
                if found["cells"] and not found["notebookLinks"]:
                    problems.append("a page with code cells offers no .ipynb to download")
        failures += [f"{name} at {width} px: {problem}" for problem in problems]
    return failures, typeset


@pytest.mark.slow
@pytest.mark.corpus
@pytest.mark.parametrize("width_name", list(WIDTHS))
def test_every_page_reads_offline(site, browser, width_name):
    base, html = site
    failures, typeset = site_problems(base, html, browser, width_name)
    assert typeset > 0, "no formula found on any page"
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.corpus
def test_search_finds_a_chapter_term(site, browser):
    base, _ = site
    context, page, problems = offline_page(browser, WIDTHS["desktop"])
    page.goto(f"{base}/search.html?q=perplexity", wait_until="load")
    page.wait_for_selector("#search-results li", timeout=30_000)
    hits = page.eval_on_selector_all("#search-results li a", "links => links.map(a => a.href)")
    context.close()
    assert not problems, "\n".join(problems)
    assert any("ngrams.html" in hit for hit in hits), hits


@pytest.mark.slow
@pytest.mark.corpus
def test_front_page_links_every_chapter_and_exercise(book_build):
    """A newcomer finds every chapter of _toc.yml and every exercise notebook on the front page
    (the built one: its lists are made from _toc.yml and exercises/ when the book is built)."""
    import yaml

    from nlpcourse.book import toc_pages

    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    page = (book_build.html / (toc["root"] + ".html")).read_text()
    page = page[page.index("<article") : page.index("</article>")]  # not the sidebar's links
    links = set(re.findall(r'href="([^"#]+)', page))
    folder = Path(toc["root"]).parent
    for entry in toc_pages(REPO)[1:]:
        target = os.path.relpath(REPO / entry, REPO / folder) + ".html"
        assert target in links, f"the front page does not link {entry}"
    for notebook in REPO.glob("exercises/*/*.ipynb"):
        name = notebook.relative_to(REPO).as_posix()
        assert name in page, f"the front page does not list {name}"
