// On a phone a table reads one row at a time (docs/stylesheets/extra.css): each cell carries its column's header,
// which the stylesheet shows before the value. `document$` is the theme's page-load signal.
document$.subscribe(() => {
  for (const table of document.querySelectorAll("article table:not([class])")) {
    const headers = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
    for (const row of table.querySelectorAll("tbody tr")) {
      [...row.children].forEach((cell, i) => cell.setAttribute("data-label", headers[i] || ""));
    }
  }
});
