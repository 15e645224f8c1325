// Images: the list, delete, build (a live log of the builder and a progress bar through
// its phases), import a tarball (upload progress).
import { api, sse, upload, type ImageInfo } from '../api';
import { ago, bytes, clear, h, showError } from '../dom';

// mmdebstrap's phases in the order it logs them ("I: ..." lines): the build's progress
const PHASES = [/choosing mirror|chroot architecture/i, /downloading packages/i, /extracting archives/i, /installing (essential|remaining)/i, /cleaning up/i, /success/i];

export function imagesPage(main: HTMLElement, _args?: string[]): void {
  const err = h('div', { class: 'slot', 'aria-live': 'polite' });
  const tbody = h('tbody');
  const load = async (): Promise<void> => {
    try {
      const r = await api<{ images: ImageInfo[] }>('GET', '/v1/images');
      clear(tbody);
      if (!r.images.length) tbody.append(h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No images.')));
      for (const i of r.images)
        tbody.append(
          h(
            'tr',
            { 'data-image': i.name },
            h('td', { 'data-label': 'Name' }, i.name),
            h('td', { 'data-label': 'Source' }, i.source),
            h('td', { 'data-label': 'Created' }, ago(i.createdAt)),
            h('td', { 'data-label': 'Size' }, bytes(i.sizeBytes)),
            h(
              'td',
              { class: 'actions' },
              h(
                'button',
                {
                  type: 'button',
                  class: 'danger',
                  'aria-label': `Delete image ${i.name}`,
                  onclick: async () => {
                    if (!confirm(`Delete image ${i.name}?`)) return;
                    try {
                      await api('DELETE', `/v1/images/${encodeURIComponent(i.name)}`);
                      await load();
                    } catch (e) {
                      showError(err, e);
                    }
                  },
                },
                'Delete',
              ),
            ),
          ),
        );
    } catch (e) {
      showError(err, e);
    }
  };

  // build
  const bname = h('input', { id: 'build-name', placeholder: 'name', required: true, 'aria-label': 'Image name', autocomplete: 'off' });
  const bpkgs = h('input', { id: 'build-packages', placeholder: 'packages (space-separated)', 'aria-label': 'Debian packages' });
  const bbar = h('progress', { id: 'build-progress', max: PHASES.length, value: 0, 'aria-label': 'Build progress' });
  const bphase = h('span', { class: 'muted', 'aria-live': 'polite' });
  const blog = h('pre', { class: 'log', id: 'build-log', tabindex: '0' });
  const bform = h('form', { class: 'inline', 'aria-label': 'Build an image' }, bname, bpkgs, h('button', { type: 'submit' }, 'Build'));
  bform.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError(err, null);
    blog.textContent = '';
    bbar.value = 0;
    bphase.textContent = 'starting';
    const packages = bpkgs.value.split(/[\s,]+/).filter(Boolean);
    try {
      for await (const e of sse('POST', `/v1/images/${encodeURIComponent(bname.value.trim())}/build`, { body: packages.length ? { packages } : {} })) {
        if (e.type === 'log') {
          const line = String(e.data ?? '');
          blog.textContent += line + '\n';
          blog.scrollTop = blog.scrollHeight;
          PHASES.forEach((re, i) => {
            if (re.test(line) && bbar.value < i + 1) {
              bbar.value = i + 1;
              bphase.textContent = line.slice(0, 80);
            }
          });
        } else if (e.type === 'complete') {
          bbar.value = PHASES.length;
          bphase.textContent = 'complete';
        } else if (e.type === 'error') {
          bphase.textContent = 'failed';
          showError(err, Object.assign(new Error(`${String(e.error ?? 'build failed')} (exit ${String(e.exitCode ?? '?')})`), { code: 'IMAGE_BUILD_FAILED' }));
        }
      }
    } catch (e) {
      bphase.textContent = 'failed';
      showError(err, e);
    }
    await load();
  });

  // import
  const iname = h('input', { id: 'import-name', placeholder: 'name', required: true, 'aria-label': 'Image name', autocomplete: 'off' });
  const ifile = h('input', { id: 'import-file', type: 'file', required: true, accept: '.tar,.tar.gz,.tgz,.tar.zst,.tar.xz,application/x-tar', 'aria-label': 'Tarball' });
  const ireplace = h('input', { id: 'import-replace', type: 'checkbox' });
  const ibar = h('progress', { id: 'import-progress', max: 100, value: 0, 'aria-label': 'Upload progress' });
  const ipct = h('span', { class: 'muted', 'aria-live': 'polite' });
  const iform = h('form', { class: 'inline', 'aria-label': 'Import an image' }, iname, ifile, ireplace, h('label', { for: 'import-replace' }, 'replace'), h('button', { type: 'submit' }, 'Import'));
  iform.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError(err, null);
    const f = ifile.files?.[0];
    if (!f) return;
    ibar.value = 0;
    try {
      const path = `/v1/images/${encodeURIComponent(iname.value.trim())}/import${ireplace.checked ? '?replace=true' : ''}`;
      await upload('POST', path, f, (l, t) => {
        ibar.value = t ? Math.round((100 * l) / t) : 100;
        ipct.textContent = ibar.value < 100 ? `${ibar.value} %` : 'unpacking…';
      });
      ipct.textContent = 'imported';
    } catch (e) {
      ipct.textContent = 'failed';
      showError(err, e);
    }
    await load();
  });

  main.append(
    h('h1', {}, 'Images'),
    err,
    h('div', { class: 'scroll' }, h('table', { class: 'list', id: 'images' }, h('thead', {}, h('tr', {}, ['Name', 'Source', 'Created', 'Size', ''].map((c) => h('th', { scope: 'col' }, c)))), tbody)),
    h('h2', {}, 'Build'),
    bform,
    h('div', { class: 'progress-row' }, bbar, bphase),
    blog,
    h('h2', {}, 'Import a tarball'),
    h('p', { class: 'muted' }, 'An OCI image layout or a docker save tarball, any compression.'),
    iform,
    h('div', { class: 'progress-row' }, ibar, ipct),
  );
  void load();
}
