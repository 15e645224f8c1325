// A few DOM helpers: elements built in code (no HTML strings: nothing the API returns is
// parsed as markup, except a code result's html, which goes through sanitizeTable).
type Child = Node | string | null | undefined | false;
type Attrs = Record<string, string | boolean | number | EventListener | undefined | null>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v as EventListener);
    else if (k === 'class') el.className = String(v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

export function clear(el: Element): void {
  while (el.firstChild) el.firstChild.remove();
}

export function bytes(n: number | undefined): string {
  if (n === undefined || n === null || !Number.isFinite(n)) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n < 10 && i ? n.toFixed(1) : Math.round(n)} ${u[i]}`;
}

export function ago(iso: string | undefined): string {
  if (!iso) return '–';
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return iso;
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

/** An error box with the API's code and message (role=alert: read out, never blank). */
export function errorBox(e: unknown): HTMLElement {
  const code = (e as { code?: string })?.code ?? 'ERROR';
  const msg = (e as Error)?.message ?? String(e);
  return h('div', { class: 'error', role: 'alert' }, h('strong', { class: 'code' }, code), ' ', msg);
}

/** Show e in slot (replacing what it held), or clear the slot with null. */
export function showError(slot: Element, e: unknown | null): void {
  clear(slot);
  if (e !== null) slot.append(errorBox(e));
}

const TABLE_TAGS = new Set(['TABLE', 'THEAD', 'TBODY', 'TFOOT', 'TR', 'TH', 'TD', 'CAPTION', 'DIV', 'SPAN', 'B', 'I', 'STRONG', 'EM', 'BR', 'P', 'STYLE']);
const KEEP_ATTRS = new Set(['colspan', 'rowspan', 'class']);

/** A code result's html (pandas tables) as inert DOM: table elements and text only, no
 * attribute but colspan/rowspan/class, no script, link, image or style sheet. */
export function sanitizeTable(html: string): DocumentFragment {
  const doc = new DOMParser().parseFromString(`<body>${html}</body>`, 'text/html');
  const out = document.createDocumentFragment();
  const copy = (n: Node, into: Node): void => {
    if (n.nodeType === Node.TEXT_NODE) {
      into.appendChild(document.createTextNode(n.textContent ?? ''));
      return;
    }
    if (n.nodeType !== Node.ELEMENT_NODE) return;
    const el = n as Element;
    if (el.tagName === 'STYLE') return;
    if (!TABLE_TAGS.has(el.tagName)) {
      for (const c of Array.from(el.childNodes)) copy(c, into);
      return;
    }
    const e = document.createElement(el.tagName.toLowerCase());
    for (const a of Array.from(el.attributes)) if (KEEP_ATTRS.has(a.name)) e.setAttribute(a.name, a.value);
    for (const c of Array.from(el.childNodes)) copy(c, e);
    into.appendChild(e);
  };
  for (const c of Array.from(doc.body.childNodes)) copy(c, out);
  return out;
}
