// Entry point of the course's in-page tools (added by parallel_budget.sphinxext to
// pages that mount them). Loads the calculators and the record page where needed.
window.pbToolsLoaded = true;
if (document.querySelector('.pb-calc')) import('./ui.js').then((m) => m.mountAll());
if (document.querySelector('.pb-record')) import('./record.js').then((m) => m.mount());
