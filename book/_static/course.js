// Course-wide behaviour of every page (parallel_budget.book.sphinxext adds it; no calculator needed):
// figures readable on a phone, search excerpts without raw TeX, and search opened from disk.
(function () {
  'use strict';

  // A chapter figure is a picture of text (matplotlib, 8.5 pt and more at 110 dpi: 13 px and more).
  // Shrunk to a phone's width its labels fell to 5-6 px; it is shown at least this share of its own
  // size (11 px text) and scrolls sideways in its box, which the keyboard can reach.
  var FIGURE_SCALE = 0.85;
  function fitFigures() {
    document.querySelectorAll('.cell_output > figure').forEach(function (box) {
      var img = box.querySelector('img');
      if (!img || !img.naturalWidth) return;
      var least = Math.ceil(img.naturalWidth * FIGURE_SCALE);
      img.style.minWidth = box.clientWidth < least ? least + 'px' : '';
      reachable(box, '图（可左右滚动）：' + (img.alt || ''));
    });
    // Wide tables of the chapters' outputs scroll in their own box (class pb-scroll) too.
    document.querySelectorAll('.cell_output .pb-scroll').forEach(function (box) { reachable(box, '表格（可左右滚动）'); });
  }
  // A box that scrolls sideways is a region the keyboard can reach (and scroll); one that fits is not a tab stop.
  function reachable(box, label) {
    if (box.scrollWidth > box.clientWidth + 1) {
      box.tabIndex = 0;
      box.setAttribute('role', 'region');
      box.setAttribute('aria-label', label);
      box.dataset.pbScroll = '1';
    } else if (box.dataset.pbScroll) {
      box.removeAttribute('tabindex');
      box.removeAttribute('role');
      box.removeAttribute('aria-label');
      delete box.dataset.pbScroll;
    }
  }
  // A computed number in the prose ({eval}: "3 GB", "120 ms") never breaks between number and unit; a
  // computed sentence still wraps.  (parallel_budget.book.prose keeps typed numbers with no-break spaces.)
  var VALUE = /^[+-]?[\d.,]+(e[+-]?\d+)?\s?([kKMGTP]i?)?(B|b|bits?|B\/s|b\/s|FLOP\/s|FLOPS|FLOP|ms|µs|us|ns|s|min|h|%|亿|万|×)?$/;
  function keepValues() {
    document.querySelectorAll('span.output.text_plain').forEach(function (e) {
      if (VALUE.test(e.textContent.trim())) e.style.whiteSpace = 'nowrap';
    });
  }
  document.addEventListener('DOMContentLoaded', keepValues);

  var pending = 0;
  window.addEventListener('load', fitFigures);
  window.addEventListener('resize', function () { clearTimeout(pending); pending = setTimeout(fitFigures, 100); });

  // Search (Sphinx's searchtools.js, on search.html only). Patched before Search.init runs: this
  // script is loaded in the page head, before searchtools.js registers its start-up.
  document.addEventListener('DOMContentLoaded', function () {
    if (typeof Search === 'undefined') return;
    // Excerpts come from the result pages' HTML, where formulas are still TeX for MathJax.
    var toText = Search.htmlToText;
    Search.htmlToText = function (html, anchor) {
      var doc = new DOMParser().parseFromString(html, 'text/html');
      doc.querySelectorAll('.math, mjx-container, .MathJax').forEach(function (m) { m.replaceWith('（公式）'); });
      doc.querySelectorAll('nav, .bd-toc, .toctree-wrapper, .headerlink').forEach(function (m) { m.remove(); });
      return toText(doc.documentElement.outerHTML, anchor);
    };
    // From disk the browser refuses to read the result pages, so excerpts are off and the reader is told.
    if (location.protocol === 'file:') {
      DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false;
      var note = document.createElement('p');
      note.className = 'pb-search-note';
      note.textContent = '提示：本页是从本地文件直接打开的，搜索结果只列出页面，不显示摘要。'
        + '要看摘要，请在 _build/html 目录里运行 python -m http.server，再用浏览器打开 http://localhost:8000/search.html。';
      var results = document.getElementById('search-results');
      if (results) results.parentNode.insertBefore(note, results);
    }
  });
})();
