// Render the formulas pymdownx.arithmatex marked (generic mode: \( \) inline, \[ \] display) with the
// KaTeX served beside this file. Only those elements are read, never the whole page: a string from the
// data can hold a backslash or a dollar sign, and it must stay text.
function renderMath(root) {
  if (typeof katex === "undefined") return;
  root.querySelectorAll(".arithmatex").forEach(function (el) {
    var tex = el.textContent.trim();
    var display = tex.startsWith("\\[");
    if (!(display || tex.startsWith("\\("))) return;  // already rendered, or not arithmatex's output
    katex.render(tex.slice(2, -2), el, { displayMode: display, throwOnError: false, output: "htmlAndMathml" });
  });
}
if (typeof document$ !== "undefined") {
  document$.subscribe(function () { renderMath(document.body); });  // every page, instant navigation too
} else {
  document.addEventListener("DOMContentLoaded", function () { renderMath(document.body); });
}
