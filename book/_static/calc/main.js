// Entry point of the course's in-page tools (registered by parallel_budget.sphinxext).
// Loads the calculators and the record page only where a page mounts them.
if (document.querySelector('.pb-calc')) import('./ui.js').then((m) => m.mountAll());
if (document.querySelector('.pb-record')) import('./record.js').then((m) => m.mount());
