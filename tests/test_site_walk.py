"""Is every page of the site usable on a phone and a desktop, in light and dark mode, and accessible?

One browser walks every page at 390 x 844 (a phone) and 1280 x 900, in light and dark mode, and
fails on page-level horizontal overflow, a clipped calculator output, chart text under 11 px, a
number split from its unit across lines, and a figure shown so small that its text is under 11 px.
axe-core (pinned in package-lock.json, installed into node_modules by scripts/setup.sh; Playwright
injects the file, nothing is fetched) checks every page at 390 px in both modes, and the calculators
and practice boxes filled in and in their error states: no serious or critical violation, colour
contrast and 24 px tap targets (WCAG 2.2 target-size) included.
"""

from __future__ import annotations

import pytest

from conftest import ROOT
from parallel_budget.book import figures

pytestmark = pytest.mark.slow

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]
PHONE, DESKTOP = (390, 844), (1280, 900)
MIN_TEXT_PX = 11
# A chapter figure's smallest text is figures.MIN_FONT_PT at figures.DPI; shown at this share of its
# own width or more, that text is at least MIN_TEXT_PX.
FIGURE_SHARE = MIN_TEXT_PX / (figures.MIN_FONT_PT * figures.DPI / 72)

PROBE = """([minText, figureShare]) => {
  const problems = [], de = document.documentElement;
  const where = (e) => e.id ? `#${e.id}` : `${e.tagName.toLowerCase()}.${[...e.classList].join('.')}`;
  if (de.scrollWidth > de.clientWidth + 1) {
    const wide = [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > de.clientWidth + 1)
      .filter((e) => !e.closest('.pb-scroll, .cell_output > .output, .cell_output > figure, pre, .pst-scrollable-table-container'))
      .slice(-3).map(where);
    problems.push(`页面横向溢出 ${de.scrollWidth - de.clientWidth} px：${wide.join(', ')}`);
  }
  for (const e of document.querySelectorAll('.pb-calc [data-out], .pb-calc .pb-out dt, .pb-calc .pb-msg, .pb-practice .pb-q-fb')) {
    if (!e.getClientRects().length) continue;
    const box = e.closest('.pb-calc, .pb-practice').getBoundingClientRect(), r = e.getBoundingClientRect();
    const scrolls = e.closest('.pb-scroll');
    if (e.scrollWidth > e.clientWidth + 1 || (!scrolls && (r.right > box.right + 1 || r.left < box.left - 1))) {
      problems.push(`计算器输出被截断：${where(e)} “${e.textContent.slice(0, 30)}”`);
    }
  }
  for (const t of document.querySelectorAll('svg text')) {
    if (!t.getClientRects().length || !t.textContent.trim()) continue;
    const m = t.getScreenCTM(), px = parseFloat(getComputedStyle(t).fontSize) * (m ? Math.hypot(m.a, m.b) : 1);
    if (px < minText - 0.05) problems.push(`图表文字只有 ${px.toFixed(1)} px：“${t.textContent.slice(0, 20)}”`);
  }
  for (const img of document.querySelectorAll('.cell_output > figure img')) {
    const w = img.getBoundingClientRect().width;
    if (img.naturalWidth && w < figureShare * img.naturalWidth - 0.5) {
      problems.push(`图缩得太小（${Math.round(w)} / ${img.naturalWidth} px，文字不到 ${minText} px）：${img.alt}`);
    }
  }
  // A value and its unit on one line: calculator outputs, table cells, the prose's computed numbers.
  for (const e of document.querySelectorAll('.pb-calc [data-out], .pb-table td, span.output.text_plain, .pb-lab b')) {
    const text = e.textContent.trim();
    if (!e.getClientRects().length || text.length > 24 || !/\\d\\s*[A-Za-zµ%亿万]/.test(text)) continue;
    const range = document.createRange();
    range.selectNodeContents(e);
    const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
    if (lines.size > 1) problems.push(`数和单位被拆到两行：“${text}”`);
  }
  return problems;
}"""

AXE_RUN = """async (tags) => {
  const r = await axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'],
    rules: { 'target-size': { enabled: true }, 'color-contrast': { enabled: true } } });
  const ran = new Set([...r.violations, ...r.passes, ...r.incomplete, ...r.inapplicable].map((v) => v.id));
  const missing = ['target-size', 'color-contrast'].filter((id) => !ran.has(id)).map((id) => `rule ${id} did not run`);
  return missing.concat(r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 4).map((n) => n.target.join(' ')).join(' | ')}`));
}"""


def site_pages(built_site) -> list[str]:
    pages = sorted(f"book/{p.name}" for p in built_site.glob("book/*.html"))
    return pages + ["search.html", "genindex.html"]


def open_page(tab, path: str, scheme: str):
    """Open ``path`` and wait until the theme shows ``scheme`` and the page's tools have mounted."""
    page = tab.open(path)
    page.wait_for_function("s => document.documentElement.dataset.theme === s", arg=scheme)
    page.wait_for_function("""() => [...document.querySelectorAll('.pb-calc')].every((c) => c.querySelector('form'))
      && [...document.querySelectorAll('.pb-practice')].every((b) => b.querySelector('form'))""")
    page.evaluate("document.fonts.ready")
    return page


def axe(page) -> list[str]:
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    return page.evaluate(AXE_RUN, AXE_TAGS)


@pytest.fixture(scope="module")
def axe_file():
    if not AXE.is_file():
        pytest.fail(f"{AXE} 不存在：axe-core 由 scripts/setup.sh 按 package-lock.json 安装（make book 会运行它）。")
    return AXE


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_at_phone_and_desktop_width(browser, base_url, built_site, axe_file, scheme):
    """At 390 and 1280 px: no sideways page scroll, no clipped output, chart text >= 11 px, units kept;
    at 390 px also no serious or critical axe-core violation on any page?"""
    from serve import Tab

    problems = []
    for size in (PHONE, DESKTOP):
        tab = Tab(browser, base_url, viewport={"width": size[0], "height": size[1]}, color_scheme=scheme)
        try:
            for path in site_pages(built_site):
                page = open_page(tab, path, scheme)
                found = page.evaluate(PROBE, [MIN_TEXT_PX, FIGURE_SHARE])
                if size == PHONE:
                    found += [f"axe {v}" for v in axe(page)]
                problems += [f"{size[0]} px {scheme} {path}: {p}" for p in found]
        finally:
            tab.check()
    assert not problems, "\n".join(problems)


CALC_ERRORS = {"ring": {"bandwidth": "1e-300 GB/s", "grad": "500 mb"}, "zero": {"params": "7 billion"},
               "update": {"grads": "3"}, "pipeline": {"stage_times": "10, 10"}, "tp": {"hidden": "4095"}}
CALC_FILLED = {"ring": {"bandwidth": "25 Gb/s", "grad": "0.5 TB", "compute": "1.2 s"}, "zero": {"params": "70B", "dp": "64"},
               "update": {"grads": "1，2；3、4"}, "pipeline": {"stages": "16", "microbatches": "64"}, "tp": {"tp": "8"}}


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_calculators_and_practice_filled_and_in_error(browser, base_url, axe_file, scheme):
    """Filled in and with bad input, do the calculators and practice boxes pass axe-core and stay unclipped at 390 px?"""
    from serve import Tab

    tab = Tab(browser, base_url, viewport={"width": PHONE[0], "height": PHONE[1]}, color_scheme=scheme)
    problems = []
    try:
        page = open_page(tab, "book/calculators.html", scheme)
        for state in (CALC_FILLED, CALC_ERRORS):
            for kind, values in state.items():
                for name, value in values.items():
                    page.fill(f"#pb-{kind}-{name}", value)
            if state is CALC_ERRORS:
                assert page.locator(".pb-calc.pb-invalid").count() == len(CALC_ERRORS)
            found = page.evaluate(PROBE, [MIN_TEXT_PX, FIGURE_SHARE]) + [f"axe {v}" for v in axe(page)]
            problems += [f"calculators {'error' if state is CALC_ERRORS else 'filled'}: {p}" for p in found]
        page = open_page(tab, "book/zero-memory.html", scheme)
        boxes = page.locator(".pb-practice")
        for i in range(boxes.count()):
            boxes.nth(i).locator("input").fill("1" if i % 2 else "abc")  # a wrong answer, or one that cannot be read
            boxes.nth(i).locator("input").press("Enter")
        boxes.nth(1).locator(".pb-q-show").click()  # a worked solution open
        assert boxes.nth(1).locator(".pb-q-sol").is_visible() and boxes.nth(0).locator(".pb-q-sol").is_hidden()
        found = page.evaluate(PROBE, [MIN_TEXT_PX, FIGURE_SHARE]) + [f"axe {v}" for v in axe(page)]
        problems += [f"practice: {p}" for p in found]
    finally:
        tab.check()
    assert not problems, "\n".join(problems)


def test_polish_of_every_page(built_site):
    """Footer line on every page, the home page's title once, the colour-mode button named in Chinese, prompts without "10^9"?"""
    import re

    home = (built_site / "book" / "intro.html").read_text(encoding="utf-8")
    title = re.search(r"<title>(.*?)</title>", home).group(1)
    assert "&#8212;" not in title and "—" not in title, title
    for path in site_pages(built_site):
        page = (built_site / path).read_text(encoding="utf-8")
        assert "本站所有计算在浏览器或构建时完成，不访问网络。" in page, path
        assert 'aria-label="Color mode"' not in page and "切换颜色模式" in page, path
    from parallel_budget import questions

    for q in questions.QUESTIONS.values():  # a prompt is plain text: "7 × 10⁹", never "7 × 10^9"
        assert "^" not in q.prompt(q.defaults()), q.id
