// A code notebook: cells of python, javascript or typescript run in the sandbox's
// interpreter contexts (POST .../code, streamed), one context per language kept for the
// page, so variables persist from cell to cell. Results as the API gives them: text,
// images (png, jpeg, svg), html tables (sanitized), json; errors with their traceback.
import { api, sbxPath, sse } from '../api';
import { clear, h, sanitizeTable, showError } from '../dom';

type Lang = 'python' | 'javascript' | 'typescript';

const contexts = new Map<string, string>(); // `${sandbox}/${lang}` -> context id

async function contextFor(id: string, lang: Lang): Promise<string> {
  const key = `${id}/${lang}`;
  const have = contexts.get(key);
  if (have) return have;
  const c = await api<{ id: string }>('POST', sbxPath(id, '/contexts'), { body: { language: lang } });
  contexts.set(key, c.id);
  return c.id;
}

function renderResult(r: Record<string, unknown>): HTMLElement {
  const box = h('div', { class: 'result' });
  if (typeof r.png === 'string') box.append(h('img', { src: `data:image/png;base64,${r.png}`, alt: 'figure (png)' }));
  else if (typeof r.jpeg === 'string') box.append(h('img', { src: `data:image/jpeg;base64,${r.jpeg}`, alt: 'figure (jpeg)' }));
  else if (typeof r.svg === 'string') box.append(h('img', { src: `data:image/svg+xml;base64,${btoa(unescape(encodeURIComponent(r.svg)))}`, alt: 'figure (svg)' }));
  else if (typeof r.html === 'string') box.append(h('div', { class: 'html' }, sanitizeTable(r.html)));
  else if (r.json !== undefined) box.append(h('pre', {}, JSON.stringify(r.json, null, 2)));
  else if (typeof r.markdown === 'string') box.append(h('pre', {}, r.markdown));
  else if (typeof r.text === 'string') box.append(h('pre', {}, r.text));
  return box;
}

function cell(id: string, list: HTMLElement, initial = '', lang: Lang = 'python'): HTMLElement {
  const n = list.children.length + 1;
  const langSel = h('select', { 'aria-label': `Language of cell ${n}`, class: 'cell-lang' }, (['python', 'javascript', 'typescript'] as Lang[]).map((l) => h('option', { value: l, selected: l === lang }, l)));
  const code = h('textarea', { class: 'cell-code', rows: 4, spellcheck: 'false', 'aria-label': `Code of cell ${n} (Shift+Enter runs it)` });
  code.value = initial;
  const out = h('div', { class: 'cell-out', 'aria-live': 'polite' });
  const count = h('span', { class: 'muted cell-count' }, '[ ]');
  const run = async (): Promise<void> => {
    clear(out);
    runBtn.disabled = true;
    count.textContent = '[*]';
    const stdout = h('pre', { class: 'stdout' });
    const stderr = h('pre', { class: 'stderr' });
    out.append(stdout, stderr);
    try {
      const lang = langSel.value as Lang;
      const contextId = await contextFor(id, lang);
      for await (const ev of sse('POST', sbxPath(id, '/code'), { body: { code: code.value, contextId } })) {
        if (ev.type === 'stdout') stdout.textContent += String(ev.text ?? '');
        else if (ev.type === 'stderr') stderr.textContent += String(ev.text ?? '');
        else if (ev.type === 'result') out.append(renderResult(ev));
        else if (ev.type === 'error') {
          const tb = Array.isArray(ev.traceback) ? ev.traceback.join('\n') : String(ev.traceback ?? '');
          out.append(h('div', { class: 'error traceback', role: 'alert' }, h('strong', { class: 'code' }, String(ev.name ?? ev.code ?? 'Error')), ' ', String(ev.message ?? ''), tb ? h('pre', {}, tb) : null));
          if (ev.name === 'CONTEXT_DEAD') contexts.delete(`${id}/${lang}`);
        } else if (ev.type === 'execution_complete') count.textContent = `[${String(ev.executionCount ?? ' ')}]${ev.timedOut ? ' timed out' : ''}`;
      }
    } catch (e) {
      if ((e as { code?: string }).code === 'CONTEXT_NOT_FOUND') contexts.delete(`${id}/${langSel.value}`);
      showError(out, e);
      count.textContent = '[!]';
    } finally {
      runBtn.disabled = false;
    }
  };
  const runBtn = h('button', { type: 'button', class: 'run', onclick: () => void run() }, 'Run');
  code.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.shiftKey || ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      void run();
    }
  });
  const remove = h('button', { type: 'button', class: 'small danger', 'aria-label': `Remove cell ${n}`, onclick: () => c.remove() }, '✕');
  const c = h('div', { class: 'cell' }, h('div', { class: 'toolbar' }, count, langSel, runBtn, remove), code, out);
  return c;
}

export function notebookTab(el: HTMLElement, id: string): void {
  const err = h('div', { class: 'slot' });
  const list = h('div', { class: 'cells', id: 'cells' });
  const add = h('button', { type: 'button', id: 'add-cell', onclick: () => list.append(cell(id, list)) }, 'Add cell');
  const reset = h(
    'button',
    {
      type: 'button',
      onclick: async () => {
        showError(err, null);
        for (const [k, ctx] of contexts)
          if (k.startsWith(`${id}/`)) {
            contexts.delete(k);
            await api('DELETE', sbxPath(id, `/contexts/${encodeURIComponent(ctx)}`)).catch((e) => showError(err, e));
          }
      },
    },
    'Restart interpreters',
  );
  list.append(cell(id, list, 'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2, 4])\nplt.show()'));
  el.append(h('div', { class: 'toolbar' }, add, reset), err, list);
}
