// Re-theme every Plotly figure when the reader flips mkdocs-material's light/dark toggle.
(function () {
  function colours() {
    var dark = document.body.getAttribute("data-md-color-scheme") === "slate";
    return dark
      ? { font: "#e2e4e9", grid: "rgba(255,255,255,0.12)", line: "rgba(255,255,255,0.35)" }
      : { font: "#1f2430", grid: "rgba(0,0,0,0.10)", line: "rgba(0,0,0,0.35)" };
  }
  function restyle() {
    if (!window.Plotly) return;
    var c = colours();
    document.querySelectorAll(".js-plotly-plot").forEach(function (el) {
      var update = { "font.color": c.font, "legend.font.color": c.font };
      Object.keys(el.layout || {}).forEach(function (k) {
        if (/^[xy]axis\d*$/.test(k)) {
          update[k + ".gridcolor"] = c.grid;
          update[k + ".linecolor"] = c.line;
          update[k + ".zerolinecolor"] = c.grid;
          update[k + ".tickfont.color"] = c.font;
          update[k + ".title.font.color"] = c.font;
        }
      });
      window.Plotly.relayout(el, update);
    });
  }
  function start() {
    restyle();
    new MutationObserver(restyle).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
