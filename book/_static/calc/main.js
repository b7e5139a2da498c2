// Entry point of the course's in-page tools, added by parallel_budget.book.sphinxext to the
// pages that mount them, after model.js, ui.js and record.js (all deferred, in order).
// Classic scripts rather than ES modules: browsers refuse module scripts from file://,
// and the site must work when opened straight from disk.
(function () {
  'use strict';
  window.pbToolsLoaded = true;
  if (window.PBCalc && document.querySelector('.pb-calc')) window.PBCalc.mountAll();
  if (window.PBPlan) window.PBPlan.mountAll();
  if (window.PBRecord && document.querySelector('.pb-record')) window.PBRecord.mount();
})();
