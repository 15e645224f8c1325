// One sandbox: its summary and tabs (files, terminal, processes, ports, notebook,
// settings: env vars and labels, snapshots). #/sandbox/NAME/TAB.
import { api, sbxPath, sse, type PortInfo, type ProcessInfo, type SandboxInfo, type Snapshot } from '../api';
import { ago, bytes, clear, h, showError } from '../dom';
import type { Cleanup } from '../main';
import { filesTab } from './files';
import { terminalTab } from './terminal';
import { notebookTab } from './notebook';

type Tab = (el: HTMLElement, id: string) => Cleanup | void;

const TABS: [string, string, Tab][] = [
  ['files', 'Files', filesTab],
  ['terminal', 'Terminal', terminalTab],
  ['processes', 'Processes', processesTab],
  ['ports', 'Ports', portsTab],
  ['notebook', 'Notebook', notebookTab],
  ['settings', 'Env & labels', settingsTab],
  ['snapshots', 'Snapshots', snapshotsTab],
];

export function sandboxPage(main: HTMLElement, args: string[]): Cleanup {
  const id = args[0]!;
  const tab = TABS.find((t) => t[0] === args[1]) ?? TABS[0]!;
  const err = h('div', { class: 'slot', 'aria-live': 'polite' });
  const summary = h('dl', { class: 'summary' });
  const body = h('section', { class: 'tab', id: `tab-${tab[0]}`, 'aria-label': tab[1] });
  const loadInfo = async (): Promise<void> => {
    try {
      const s = await api<SandboxInfo>('GET', sbxPath(id));
      clear(summary);
      const item = (k: string, v: string | Node): void => void summary.append(h('div', {}, h('dt', {}, k), h('dd', {}, v)));
      item('State', h('span', { class: `state state-${s.state}` }, s.state));
      item('Image', s.image);
      item('Type', s.instanceType);
      item('Created', ago(s.createdAt));
      item('Last active', ago(s.lastActiveAt));
      item('Disk', `${bytes(s.disk?.usedBytes)} / ${bytes(s.disk?.limitBytes)}`);
      item('Network', `${s.network}${s.networkAddress ? ' ' + s.networkAddress : ''}`);
      showError(err, null);
    } catch (e) {
      showError(err, e);
    }
  };
  const destroy = h(
    'button',
    {
      type: 'button',
      class: 'danger',
      id: 'destroy',
      onclick: async () => {
        if (!confirm(`Destroy sandbox ${id} and its files?`)) return;
        try {
          await api('DELETE', sbxPath(id));
          location.hash = '#/sandboxes';
        } catch (e) {
          showError(err, e);
        }
      },
    },
    'Destroy',
  );
  // asleep now (POST /sleep, decision 0063); a tab that reads the sandbox wakes it again
  const sleep = h(
    'button',
    {
      type: 'button',
      id: 'sleep',
      title: 'Put the sandbox to sleep now (its open terminals and commands end)',
      onclick: async () => {
        sleep.disabled = true;
        sleep.textContent = 'Sleeping…';
        try {
          await api('POST', sbxPath(id, '/sleep'));
        } catch (e) {
          showError(err, e);
        } finally {
          sleep.disabled = false;
          sleep.textContent = 'Sleep';
        }
        await loadInfo();
      },
    },
    'Sleep',
  );
  main.append(
    h('div', { class: 'title' }, h('h1', {}, h('a', { href: '#/sandboxes', class: 'muted' }, 'Sandboxes'), ' / ', id), h('div', { class: 'title-actions' }, sleep, destroy)),
    summary,
    err,
    h(
      'nav',
      { class: 'tabs', 'aria-label': 'Sandbox' },
      TABS.map(([key, label]) =>
        h('a', { href: `#/sandbox/${encodeURIComponent(id)}/${key}`, 'aria-current': key === tab[0] ? 'page' : undefined, id: `tablink-${key}` }, label),
      ),
    ),
    body,
  );
  void loadInfo();
  const timer = window.setInterval(() => void loadInfo(), 5000);
  let inner: Cleanup | void;
  try {
    inner = tab[2](body, id);
  } catch (e) {
    showError(err, e);
  }
  return () => {
    clearInterval(timer);
    if (inner) inner();
  };
}

// ---- processes: start, list (live), logs streamed, kill ----
function processesTab(el: HTMLElement, id: string): Cleanup {
  const err = h('div', { class: 'slot', 'aria-live': 'polite' });
  const cmd = h('input', { id: 'proc-command', placeholder: 'python3 -m http.server 8000', 'aria-label': 'Command', autocomplete: 'off' });
  const tbody = h('tbody');
  const logs = h('pre', { class: 'log', id: 'proc-log', 'aria-live': 'off', tabindex: '0' });
  const logTitle = h('h2', {}, 'Logs');
  let stream: AbortController | null = null;
  let gone = false;
  const follow = async (p: ProcessInfo): Promise<void> => {
    stream?.abort();
    stream = new AbortController();
    logs.textContent = '';
    logTitle.textContent = `Logs of ${p.id}`;
    try {
      for await (const ev of sse('GET', sbxPath(id, `/processes/${encodeURIComponent(p.id)}/stream`), { signal: stream.signal })) {
        if (typeof ev.data === 'string') logs.textContent += ev.encoding === 'base64' ? atob(ev.data) : ev.data;
        else if (ev.type === 'exit') logs.textContent += `\n[exited ${String(ev.exitCode ?? ev.code ?? '')}]\n`;
        else if (ev.type === 'error') logs.textContent += `\n[${String(ev.code ?? 'error')}: ${String(ev.message ?? '')}]\n`;
        logs.scrollTop = logs.scrollHeight;
      }
    } catch (e) {
      if ((e as Error).name !== 'AbortError') showError(err, e);
    }
  };
  const load = async (): Promise<void> => {
    try {
      const r = await api<{ processes: ProcessInfo[] }>('GET', sbxPath(id, '/processes'));
      clear(tbody);
      if (!r.processes.length) tbody.append(h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No processes.')));
      for (const p of r.processes)
        tbody.append(
          h(
            'tr',
            { 'data-process': p.id },
            h('td', { 'data-label': 'Id' }, p.id),
            h('td', { 'data-label': 'Command' }, h('code', {}, p.command)),
            h('td', { 'data-label': 'Status' }, p.status, p.exitCode !== undefined ? ` (${p.exitCode})` : ''),
            h('td', { 'data-label': 'Started' }, ago(p.startTime)),
            h(
              'td',
              { class: 'actions' },
              h('button', { type: 'button', onclick: () => void follow(p) }, 'Logs'),
              p.status === 'running' || p.status === 'starting'
                ? h('button', { type: 'button', class: 'danger', onclick: () => void api('DELETE', sbxPath(id, `/processes/${encodeURIComponent(p.id)}`)).then(load, (e) => showError(err, e)) }, 'Kill')
                : null,
            ),
          ),
        );
    } catch (e) {
      showError(err, e);
    }
  };
  const form = h('form', { class: 'inline', 'aria-label': 'Start a process' }, cmd, h('button', { type: 'submit' }, 'Start'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError(err, null);
    try {
      const p = await api<ProcessInfo>('POST', sbxPath(id, '/processes'), { body: { command: cmd.value } });
      cmd.value = '';
      await load();
      void follow(p);
    } catch (e) {
      showError(err, e);
    }
  });
  el.append(form, err, h('div', { class: 'scroll' }, h('table', { class: 'list', id: 'processes' }, h('thead', {}, h('tr', {}, ['Id', 'Command', 'Status', 'Started', ''].map((c) => h('th', { scope: 'col' }, c)))), tbody)), logTitle, logs);
  const poll = async (): Promise<void> => {
    await load();
    if (!gone) timer = window.setTimeout(() => void poll(), 2000);
  };
  let timer = 0;
  void poll();
  return () => {
    gone = true;
    clearTimeout(timer);
    stream?.abort();
  };
}

// ---- ports: expose, list with preview links (new tab), unexpose ----
function portsTab(el: HTMLElement, id: string): void {
  const err = h('div', { class: 'slot', 'aria-live': 'polite' });
  const port = h('input', { id: 'port-number', type: 'number', min: 1024, max: 65535, placeholder: '8000', 'aria-label': 'Port', required: true });
  const name = h('input', { id: 'port-name', placeholder: 'name (optional)', 'aria-label': 'Name' });
  const list = h('ul', { class: 'ports', id: 'ports' });
  const load = async (): Promise<void> => {
    try {
      const r = await api<{ ports: PortInfo[] }>('GET', sbxPath(id, '/ports'));
      clear(list);
      if (!r.ports.length) list.append(h('li', { class: 'muted' }, 'No exposed ports.'));
      for (const p of r.ports)
        list.append(
          h(
            'li',
            { 'data-port': p.port },
            h('strong', {}, String(p.port)),
            p.name ? ` ${p.name} ` : ' ',
            h('a', { href: p.url, target: '_blank', rel: 'noopener noreferrer', class: 'preview' }, p.url),
            p.status && p.status !== 'active' ? h('span', { class: 'muted' }, ` (${p.status})`) : null,
            h('button', { type: 'button', class: 'danger', onclick: () => void api('DELETE', sbxPath(id, `/ports/${p.port}`)).then(load, (e) => showError(err, e)) }, 'Unexpose'),
          ),
        );
    } catch (e) {
      showError(err, e);
    }
  };
  const form = h('form', { class: 'inline', 'aria-label': 'Expose a port' }, port, name, h('button', { type: 'submit' }, 'Expose'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError(err, null);
    try {
      await api('POST', sbxPath(id, '/ports'), { body: { port: Number(port.value), ...(name.value ? { name: name.value } : {}) } });
      await load();
    } catch (e) {
      showError(err, e);
    }
  });
  el.append(form, err, list);
  void load();
}

// ---- env vars and labels ----
function settingsTab(el: HTMLElement, id: string): void {
  const err = h('div', { class: 'slot', 'aria-live': 'polite' });
  const envBody = h('tbody');
  const labelBody = h('tbody');
  const sleepAfter = h('input', { id: 'set-sleep', size: 8, 'aria-label': 'Sleep after (seconds or 30s, 10m, 2h)' });
  const keepAlive = h('input', { id: 'set-keep', type: 'checkbox' });
  let info: SandboxInfo | null = null;
  const kvRows = (body: HTMLElement, kv: Record<string, string>, remove: (k: string) => void): void => {
    clear(body);
    const keys = Object.keys(kv).sort();
    if (!keys.length) body.append(h('tr', {}, h('td', { colspan: 3, class: 'muted' }, 'None.')));
    for (const k of keys)
      body.append(h('tr', {}, h('td', {}, h('code', {}, k)), h('td', {}, h('code', {}, kv[k] ?? '')), h('td', { class: 'actions' }, h('button', { type: 'button', class: 'danger', 'aria-label': `Remove ${k}`, onclick: () => remove(k) }, 'Remove'))));
  };
  const load = async (): Promise<void> => {
    try {
      info = await api<SandboxInfo>('GET', sbxPath(id));
      kvRows(envBody, info.env ?? {}, (k) => void setEnv({ [k]: null }));
      kvRows(labelBody, info.labels ?? {}, (k) => {
        const l = { ...(info?.labels ?? {}) };
        delete l[k];
        void put({ labels: l });
      });
      sleepAfter.value = String(info.sleepAfter ?? '');
      keepAlive.checked = !!info.keepAlive;
      showError(err, null);
    } catch (e) {
      showError(err, e);
    }
  };
  const setEnv = async (vars: Record<string, string | null>): Promise<void> => {
    try {
      await api('POST', sbxPath(id, '/env'), { body: { vars } });
      await load();
    } catch (e) {
      showError(err, e);
    }
  };
  const put = async (body: Record<string, unknown>): Promise<void> => {
    try {
      await api('PUT', sbxPath(id), { body });
      await load();
    } catch (e) {
      showError(err, e);
    }
  };
  const kvForm = (label: string, idp: string, onAdd: (k: string, v: string) => void): HTMLFormElement => {
    const k = h('input', { id: `${idp}-key`, placeholder: 'NAME', 'aria-label': `${label} name`, required: true, autocomplete: 'off' });
    const v = h('input', { id: `${idp}-value`, placeholder: 'value', 'aria-label': `${label} value`, autocomplete: 'off' });
    const f = h('form', { class: 'inline', 'aria-label': `Set ${label}` }, k, v, h('button', { type: 'submit' }, 'Set'));
    f.addEventListener('submit', (ev) => {
      ev.preventDefault();
      onAdd(k.value.trim(), v.value);
      k.value = v.value = '';
    });
    return f;
  };
  const sleepForm = h('form', { class: 'inline', 'aria-label': 'Sleep settings' }, h('label', { for: 'set-sleep' }, 'Sleep after'), sleepAfter, keepAlive, h('label', { for: 'set-keep' }, 'Keep alive'), h('button', { type: 'submit' }, 'Save'));
  sleepForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const s = sleepAfter.value.trim();
    void put({ sleepAfter: /^\d+$/.test(s) ? Number(s) : s, keepAlive: keepAlive.checked });
  });
  el.append(
    err,
    h('h2', {}, 'Environment variables'),
    kvForm('variable', 'env', (k, v) => void setEnv({ [k]: v })),
    h('div', { class: 'scroll' }, h('table', { class: 'list kv', id: 'env' }, envBody)),
    h('h2', {}, 'Labels'),
    kvForm('label', 'label', (k, v) => void put({ labels: { ...(info?.labels ?? {}), [k]: v } })),
    h('div', { class: 'scroll' }, h('table', { class: 'list kv', id: 'labels' }, labelBody)),
    h('h2', {}, 'Sleep'),
    sleepForm,
  );
  void load();
}

// ---- snapshots of this sandbox ----
function snapshotsTab(el: HTMLElement, id: string): void {
  const err = h('div', { class: 'slot', 'aria-live': 'polite' });
  const tbody = h('tbody');
  const name = h('input', { id: 'snap-name', placeholder: 'name (optional)', 'aria-label': 'Snapshot name', autocomplete: 'off' });
  const load = async (): Promise<void> => {
    try {
      const r = await api<{ snapshots: Snapshot[] }>('GET', sbxPath(id, '/snapshots'));
      clear(tbody);
      if (!r.snapshots.length) tbody.append(h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No snapshots of this sandbox.')));
      for (const s of r.snapshots)
        tbody.append(h('tr', {}, h('td', {}, h('code', {}, s.snapshotId)), h('td', {}, s.name ?? ''), h('td', {}, bytes(s.sizeBytes)), h('td', {}, ago(s.createdAt)), h('td', {}, s.method ?? '')));
    } catch (e) {
      showError(err, e);
    }
  };
  const form = h('form', { class: 'inline', 'aria-label': 'Take a snapshot' }, name, h('button', { type: 'submit' }, 'Take snapshot'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError(err, null);
    try {
      await api('POST', sbxPath(id, '/snapshots'), { body: name.value.trim() ? { name: name.value.trim() } : {} });
      name.value = '';
      await load();
    } catch (e) {
      showError(err, e);
    }
  });
  el.append(form, err, h('div', { class: 'scroll' }, h('table', { class: 'list', id: 'snapshots' }, h('thead', {}, h('tr', {}, ['Id', 'Name', 'Size', 'Taken', 'Method'].map((c) => h('th', { scope: 'col' }, c)))), tbody)));
  void load();
}
