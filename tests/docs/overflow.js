// What scrolls sideways on the open page. Returns {code: n, tables: n, offenders: [...]}, one text per offender.
// Hidden content is measured too: every content tab is shown and every <details> opened first.
const tolerance = arguments[0];
document.querySelectorAll("article details").forEach((d) => { d.open = true; });
const style = document.createElement("style");
style.textContent = ".md-typeset .tabbed-set > .tabbed-content > .tabbed-block { display: block !important; }";
document.head.appendChild(style);
const headings = [...document.querySelectorAll("article h1[id], article h2[id], article h3[id], article h4[id]")];
function where(el) {
  // The nearest heading above the element, as the page's anchor.
  let anchor = "";
  for (const h of headings) {
    if (h.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) anchor = h.id;
  }
  return anchor ? "#" + anchor : "(top)";
}
const offenders = [];
const blocks = [...document.querySelectorAll("article pre > code")];
for (const code of blocks) {
  const over = code.scrollWidth - code.clientWidth;
  if (over <= tolerance) continue;
  const title = code.closest(".highlight")?.querySelector(".filename")?.textContent;
  const lines = code.textContent.split("\n");
  const widest = lines.reduce((a, b) => (b.length > a.length ? b : a), "");
  offenders.push(
    `${where(code)}: code block${title ? ` "${title}"` : ""} ${over}px too wide; widest line ` +
      `(${widest.length} chars): ${JSON.stringify(widest.trim().slice(0, 90))}`
  );
}
// Material wraps each table in a scrolling div (md-typeset__scrollwrap); a table outside one scrolls itself.
const tables = [...document.querySelectorAll("article table:not(.highlighttable)")];
for (const table of tables) {
  const box = table.closest(".md-typeset__scrollwrap") || table;
  const over = box.scrollWidth - box.clientWidth;
  if (over <= tolerance) continue;
  const header = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
  offenders.push(`${where(table)}: table [${header.join(" | ").slice(0, 100)}] ${over}px too wide`);
}
const page = document.scrollingElement;
const pageOver = page.scrollWidth - page.clientWidth;
return { code: blocks.length, tables: tables.length, pageOver: pageOver, offenders: offenders };
