// parallel-budget-anchors: a JupyterLab extension written by hand, without a build step (issue 25).
//
// A link like glossary.md#term-bucket makes JupyterLab open the notebook and call its setFragment once, as
// soon as the file is loaded.  jupyterlab-myst renders the Markdown a moment later (the glossary's terms
// appear about 0.4 s after), so the term is not there yet and the notebook stays at its top.  This plugin
// waits for the command that followed the link, then scrolls to the element with that id when it appears
// (for at most 10 s).  It uses only public API: CommandRegistry.commandExecuted and the shell's current
// widget.
//
// The file is a module-federation container as JupyterLab 4 loads one (bootstrap.js loadComponent,
// index.out.js createModule): window._JUPYTERLAB[name] with init() and get("./extension").
(function () {
  "use strict";
  var LINK_COMMAND = "rendermime:handle-local-link";
  var WAIT_MS = 10000;

  function scrollWhenRendered(app, id) {
    var deadline = Date.now() + WAIT_MS;
    var selector = '[id="' + CSS.escape(id) + '"]';
    (function look() {
      var widget = app.shell.currentWidget;
      var target = widget && widget.node.querySelector(selector);
      if (target) {
        target.scrollIntoView({ block: "start" });
      } else if (Date.now() < deadline) {
        setTimeout(look, 100);
      }
    })();
  }

  var plugin = {
    id: "parallel-budget-anchors:plugin",
    description: "Scroll to a link's #anchor once jupyterlab-myst has rendered it.",
    autoStart: true,
    activate: function (app) {
      app.commands.commandExecuted.connect(function (_, executed) {
        var fragment = executed.id === LINK_COMMAND && executed.args && executed.args.id;
        if (typeof fragment !== "string" || fragment.charAt(0) !== "#" || fragment.indexOf("=") >= 0) {
          return;  // no anchor, or one of JupyterLab's own kinds (#heading=..., #cell-id=...)
        }
        Promise.resolve(executed.result).then(function () {
          scrollWhenRendered(app, decodeURIComponent(fragment.slice(1)));
        }, function () {});
      });
    }
  };

  var registry = (window._JUPYTERLAB = window._JUPYTERLAB || {});
  registry["parallel-budget-anchors"] = {
    init: function () { return Promise.resolve(); },
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error("parallel-budget-anchors has no module " + module));
      }
      return Promise.resolve(function () { return { __esModule: true, default: plugin }; });
    }
  };
})();
