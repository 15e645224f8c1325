// Sandboxes: the list (state, image, instance type, age, last activity, disk, network),
// live by polling every 3 s, filtered as typed; create with options; sleep, wake, destroy.
import { api, sbxPath, type ImageInfo, type SandboxInfo } from '../api';
import { ago, bytes, clear, h, showError } from '../dom';
import type { Cleanup } from '../main';

const TYPES = ['lite', 'basic', 'standard-1', 'standard-2', 'standard-3', 'standard-4'];

function parseLabels(s: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of s.split(',').map((x) => x.trim()).filter(Boolean)) {
    const i = part.indexOf('=');
    if (i <= 0) throw Object.assign(new Error(`label '${part}' is not KEY=VALUE`), { code: 'VALIDATION_FAILED' });
    out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

function createForm(onDone: (id: string) => void): HTMLElement {
  const err = h('div', { class: 'slot', 'aria-live': 'polite' });
  const name = h('input', { id: 'new-name', name: 'name', required: true, placeholder: 'my-box', autocomplete: 'off' });
  const image = h('select', { id: 'new-image', name: 'image' }, h('option', { value: '' }, 'default'));
  const type = h('select', { id: 'new-type', name: 'instanceType' }, h('option', { value: '' }, 'default'), TYPES.map((t) => h('option', { value: t }, t)));
  const network = h('select', { id: 'new-network', name: 'network' }, h('option', { value: '' }, 'default'), h('option', { value: 'none' }, 'none'), h('option', { value: 'outbound' }, 'outbound'));
  const sleepAfter = h('input', { id: 'new-sleep', name: 'sleepAfter', placeholder: '10m', size: 6 });
  const keepAlive = h('input', { id: 'new-keep', type: 'checkbox', name: 'keepAlive' });
  const labels = h('input', { id: 'new-labels', name: 'labels', placeholder: 'team=web, env=dev' });
  void api<{ images: ImageInfo[] }>('GET', '/v1/images')
    .then((r) => r.images.forEach((i) => image.append(h('option', { value: i.name }, i.name))))
    .catch((e) => showError(err, e));
  const form = h(
    'form',
    { class: 'create', 'aria-label': 'Create a sandbox' },
    h('div', { class: 'field' }, h('label', { for: 'new-name' }, 'Name'), name),
    h('div', { class: 'field' }, h('label', { for: 'new-image' }, 'Image'), image),
    h('div', { class: 'field' }, h('label', { for: 'new-type' }, 'Instance type'), type),
    h('div', { class: 'field' }, h('label', { for: 'new-network' }, 'Network'), network),
    h('div', { class: 'field' }, h('label', { for: 'new-sleep' }, 'Sleep after'), sleepAfter),
    h('div', { class: 'field' }, h('label', { for: 'new-labels' }, 'Labels'), labels),
    h('div', { class: 'field check' }, keepAlive, h('label', { for: 'new-keep' }, 'Keep alive')),
    h('button', { type: 'submit' }, 'Create'),
    err,
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError(err, null);
    const body: Record<string, unknown> = {};
    try {
      if (image.value) body.image = image.value;
      if (type.value) body.instanceType = type.value;
      if (network.value) body.network = network.value;
      if (sleepAfter.value.trim()) body.sleepAfter = /^\d+$/.test(sleepAfter.value.trim()) ? Number(sleepAfter.value.trim()) : sleepAfter.value.trim();
      if (keepAlive.checked) body.keepAlive = true;
      if (labels.value.trim()) body.labels = parseLabels(labels.value);
      const btn = form.querySelector('button')!;
      btn.disabled = true;
      btn.textContent = 'Creating…';
      try {
        const info = await api<SandboxInfo>('PUT', sbxPath(name.value.trim()), { body });
        onDone(info.id);
      } finally {
        btn.disabled = false;
        btn.textContent = 'Create';
      }
    } catch (e) {
      showError(err, e);
    }
  });
  return form;
}

export function sandboxesPage(main: HTMLElement, _args?: string[]): Cleanup {
  let list: SandboxInfo[] = [];
  let timer = 0;
  let gone = false;
  const err = h('div', { class: 'slot', 'aria-live': 'polite' });
  const filter = h('input', { id: 'filter', type: 'search', placeholder: 'Filter by name, state, image, label', 'aria-label': 'Filter sandboxes' });
  const tbody = h('tbody');
  const count = h('span', { class: 'muted' });
  const render = (): void => {
    const f = filter.value.trim().toLowerCase();
    const rows = list.filter((s) =>
      !f ||
      [s.id, s.state, s.image, s.instanceType, s.network, s.tenant ?? '', ...Object.entries(s.labels ?? {}).map(([k, v]) => `${k}=${v}`)]
        .join(' ')
        .toLowerCase()
        .includes(f),
    );
    count.textContent = `${rows.length} of ${list.length}`;
    clear(tbody);
    if (!rows.length) tbody.append(h('tr', {}, h('td', { colspan: 9, class: 'muted' }, list.length ? 'No sandbox matches.' : 'No sandboxes yet.')));
    for (const s of rows) {
      const link = `#/sandbox/${encodeURIComponent(s.id)}/files`;
      tbody.append(
        h(
          'tr',
          { 'data-sandbox': s.id },
          h('td', { 'data-label': 'Name' }, h('a', { href: link }, s.id), s.tenant ? h('span', { class: 'muted' }, ` (${s.tenant})`) : null),
          h('td', { 'data-label': 'State' }, h('span', { class: `state state-${s.state}` }, s.state)),
          h('td', { 'data-label': 'Image' }, s.image),
          h('td', { 'data-label': 'Type' }, s.instanceType),
          h('td', { 'data-label': 'Age' }, ago(s.createdAt)),
          h('td', { 'data-label': 'Last active' }, ago(s.lastActiveAt)),
          h('td', { 'data-label': 'Disk' }, `${bytes(s.disk?.usedBytes)} / ${bytes(s.disk?.limitBytes)}`),
          h('td', { 'data-label': 'Network' }, s.network, s.networkAddress ? h('span', { class: 'muted' }, ` ${s.networkAddress}`) : null),
          h(
            'td',
            { class: 'actions' },
            s.state === 'running'
              ? h(
                  'button',
                  {
                    type: 'button',
                    'data-action': 'sleep',
                    title: `Put ${s.id} to sleep now (its open terminals and commands end)`,
                    onclick: (ev: Event) => {
                      const b = ev.currentTarget as HTMLButtonElement;
                      b.disabled = true;
                      b.textContent = 'Sleeping…';
                      void act(() => api('POST', sbxPath(s.id, '/sleep')));
                    },
                  },
                  'Sleep',
                )
              : h('button', { type: 'button', 'data-action': 'wake', onclick: () => void act(() => api('POST', sbxPath(s.id, '/exec'), { body: { command: 'true' } })) }, 'Wake'),
            h(
              'button',
              {
                type: 'button',
                class: 'danger',
                'aria-label': `Destroy ${s.id}`,
                onclick: () => {
                  if (confirm(`Destroy sandbox ${s.id} and its files?`)) void act(() => api('DELETE', sbxPath(s.id)));
                },
              },
              'Destroy',
            ),
          ),
        ),
      );
    }
  };
  const load = async (): Promise<void> => {
    try {
      const r = await api<{ sandboxes: SandboxInfo[] }>('GET', '/v1/sandboxes');
      list = r.sandboxes.sort((a, b) => a.id.localeCompare(b.id));
      showError(err, null);
      render();
    } catch (e) {
      showError(err, e);
    }
  };
  const poll = async (): Promise<void> => {
    await load();
    if (!gone) timer = window.setTimeout(() => void poll(), 3000);
  };
  const act = async (f: () => Promise<unknown>): Promise<void> => {
    try {
      await f();
    } catch (e) {
      showError(err, e);
    }
    await load();
  };
  filter.addEventListener('input', render);
  main.append(
    h('h1', {}, 'Sandboxes'),
    createForm((id) => (location.hash = `#/sandbox/${encodeURIComponent(id)}/files`)),
    err,
    h('div', { class: 'toolbar' }, filter, count),
    h(
      'div',
      { class: 'scroll' },
      h(
        'table',
        { class: 'list', id: 'sandboxes' },
        h('thead', {}, h('tr', {}, ['Name', 'State', 'Image', 'Type', 'Age', 'Last active', 'Disk', 'Network', ''].map((c) => h('th', { scope: 'col' }, c)))),
        tbody,
      ),
    ),
  );
  void poll();
  return () => {
    gone = true;
    clearTimeout(timer);
  };
}
