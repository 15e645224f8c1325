// Files: a tree of the sandbox's directories (opened on demand), a text editor with
// highlighting (CodeMirror 6; Ctrl/Cmd+S saves), upload by drag and drop or the file
// input with progress (XMLHttpRequest), download, rename, delete.
import { EditorView, basicSetup } from 'codemirror';
import { keymap } from '@codemirror/view';
import type { Extension } from '@codemirror/state';
import { python } from '@codemirror/lang-python';
import { javascript } from '@codemirror/lang-javascript';
import { html } from '@codemirror/lang-html';
import { json } from '@codemirror/lang-json';
import { markdown } from '@codemirror/lang-markdown';
import { api, q, request, sbxPath, upload, type FileInfo } from '../api';
import { bytes, clear, h, showError } from '../dom';

const TEXT_MAX = 2 * 1024 * 1024;

function language(path: string): Extension[] {
  const ext = path.split('.').pop()?.toLowerCase() ?? '';
  if (ext === 'py') return [python()];
  if (['js', 'mjs', 'cjs', 'jsx'].includes(ext)) return [javascript({ jsx: ext === 'jsx' })];
  if (['ts', 'tsx', 'mts'].includes(ext)) return [javascript({ typescript: true, jsx: ext === 'tsx' })];
  if (['html', 'htm'].includes(ext)) return [html()];
  if (ext === 'json') return [json()];
  if (ext === 'md') return [markdown()];
  return [];
}

function join(dir: string, name: string): string {
  return dir.endsWith('/') ? dir + name : `${dir}/${name}`;
}

export function filesTab(el: HTMLElement, id: string): () => void {
  const err = h('div', { class: 'slot', 'aria-live': 'polite' });
  const tree = h('ul', { class: 'tree', id: 'file-tree', role: 'tree', 'aria-label': 'Files' });
  const progress = h('div', { class: 'uploads', id: 'uploads', 'aria-live': 'polite' });
  const fileInput = h('input', { type: 'file', id: 'upload-input', multiple: true, class: 'visually-hidden' });
  const cwdLabel = h('code', { id: 'upload-dir' }, '/workspace');
  const editorTitle = h('h2', { id: 'editor-title' }, 'No file open');
  const saveBtn = h('button', { type: 'button', id: 'save', disabled: true }, 'Save');
  const editorHost = h('div', { class: 'editor', id: 'editor' });
  let view: EditorView | null = null;
  let openPath: string | null = null;
  let uploadDir = '/workspace';
  const expanded = new Set<string>(['/workspace']);

  const listDir = async (dir: string, into: HTMLElement, depth: number): Promise<void> => {
    const r = await api<{ files: FileInfo[] }>('GET', sbxPath(id, '/files/list') + q({ path: dir, includeHidden: true }));
    clear(into);
    const files = r.files.sort((a, b) => (a.type === 'directory' ? 0 : 1) - (b.type === 'directory' ? 0 : 1) || a.name.localeCompare(b.name));
    if (!files.length) into.append(h('li', { class: 'muted', role: 'none' }, '(empty)'));
    for (const f of files) into.append(node(f, depth));
  };

  const node = (f: FileInfo, depth: number): HTMLElement => {
    const path = f.absolutePath;
    const isDir = f.type === 'directory';
    const children = h('ul', { role: 'group' });
    const label = h(
      'button',
      {
        type: 'button',
        class: `entry ${isDir ? 'dir' : 'file'}`,
        'data-path': path,
        'aria-expanded': isDir ? String(expanded.has(path)) : undefined,
        onclick: async () => {
          if (!isDir) return void open(path, f.size);
          uploadDir = path;
          cwdLabel.textContent = path;
          if (expanded.has(path)) {
            expanded.delete(path);
            clear(children);
            label.setAttribute('aria-expanded', 'false');
          } else {
            expanded.add(path);
            label.setAttribute('aria-expanded', 'true');
            await listDir(path, children, depth + 1).catch((e) => showError(err, e));
          }
        },
      },
      `${isDir ? '▸ ' : ''}${f.name}`,
    );
    const li = h(
      'li',
      { role: 'treeitem', 'data-name': f.name },
      h(
        'div',
        { class: 'row' },
        label,
        h('span', { class: 'muted size' }, isDir ? '' : bytes(f.size)),
        h(
          'span',
          { class: 'row-actions' },
          isDir ? null : h('button', { type: 'button', class: 'small', 'aria-label': `Download ${f.name}`, onclick: () => void download(path, f.name) }, '↓'),
          h('button', { type: 'button', class: 'small', 'aria-label': `Rename ${f.name}`, onclick: () => void rename(path) }, '✎'),
          h('button', { type: 'button', class: 'small danger', 'aria-label': `Delete ${f.name}`, onclick: () => void remove(path, isDir) }, '✕'),
        ),
      ),
      children,
    );
    if (isDir && expanded.has(path)) void listDir(path, children, depth + 1).catch((e) => showError(err, e));
    return li;
  };

  const refresh = async (): Promise<void> => {
    try {
      await listDir('/workspace', tree, 0);
      showError(err, null);
    } catch (e) {
      showError(err, e);
    }
  };

  const open = async (path: string, size: number): Promise<void> => {
    showError(err, null);
    if (size > TEXT_MAX) return showError(err, Object.assign(new Error(`${path} is ${bytes(size)}: too big to edit here (download it)`), { code: 'FILE_TOO_LARGE' }));
    try {
      const r = await api<{ content: string; isBinary?: boolean }>('POST', sbxPath(id, '/files/read'), { body: { path } });
      if (r.isBinary) return showError(err, Object.assign(new Error(`${path} is binary: download it`), { code: 'BINARY_FILE' }));
      openPath = path;
      editorTitle.textContent = path;
      saveBtn.disabled = false;
      view?.destroy();
      view = new EditorView({
        doc: r.content,
        parent: editorHost,
        extensions: [
          basicSetup,
          keymap.of([{ key: 'Mod-s', preventDefault: true, run: () => (void save(), true) }]),
          EditorView.contentAttributes.of({ 'aria-label': `Contents of ${path}` }),
          ...language(path),
        ],
      });
    } catch (e) {
      showError(err, e);
    }
  };

  const save = async (): Promise<void> => {
    if (!view || !openPath) return;
    saveBtn.disabled = true;
    saveBtn.textContent = 'Saving…';
    try {
      await request('PUT', sbxPath(id, '/files') + q({ path: openPath }), { raw: view.state.doc.toString(), headers: { 'Content-Type': 'application/octet-stream' } });
      saveBtn.textContent = 'Saved';
      showError(err, null);
      void refresh();
    } catch (e) {
      saveBtn.textContent = 'Save';
      showError(err, e);
    } finally {
      saveBtn.disabled = false;
      setTimeout(() => (saveBtn.textContent = 'Save'), 1500);
    }
  };
  saveBtn.addEventListener('click', () => void save());

  const download = async (path: string, name: string): Promise<void> => {
    try {
      const res = await request('GET', sbxPath(id, '/files') + q({ path }));
      const url = URL.createObjectURL(await res.blob());
      const a = h('a', { href: url, download: name });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) {
      showError(err, e);
    }
  };

  const rename = async (path: string): Promise<void> => {
    const to = prompt(`Rename or move ${path} to:`, path);
    if (!to || to === path) return;
    try {
      await api('POST', sbxPath(id, '/files/move'), { body: { from: path, to } });
      if (openPath === path) {
        openPath = to;
        editorTitle.textContent = to;
      }
      await refresh();
    } catch (e) {
      showError(err, e);
    }
  };

  const remove = async (path: string, dir: boolean): Promise<void> => {
    if (!confirm(`Delete ${path}${dir ? ' and everything in it' : ''}?`)) return;
    try {
      await request('DELETE', sbxPath(id, '/files') + q({ path, recursive: dir ? true : undefined }));
      await refresh();
    } catch (e) {
      showError(err, e);
    }
  };

  const uploadFiles = async (files: FileList | File[]): Promise<void> => {
    for (const f of Array.from(files)) {
      const bar = h('progress', { max: 100, value: 0, 'aria-label': `Upload of ${f.name}` });
      const pct = h('span', {}, '0 %');
      const row = h('div', { class: 'upload', 'data-upload': f.name }, h('span', {}, f.name), bar, pct);
      progress.append(row);
      try {
        await upload('PUT', sbxPath(id, '/files') + q({ path: join(uploadDir, f.name) }), f, (l, t) => {
          const p = t ? Math.round((100 * l) / t) : 100;
          bar.value = p;
          pct.textContent = `${p} %`;
        });
        bar.value = 100;
        pct.textContent = 'done';
        row.classList.add('done');
      } catch (e) {
        row.append(h('span', { class: 'error', role: 'alert' }, `${(e as { code?: string }).code ?? 'ERROR'} ${(e as Error).message}`));
      }
    }
    await refresh();
  };
  fileInput.addEventListener('change', () => {
    if (fileInput.files?.length) void uploadFiles(fileInput.files);
    fileInput.value = '';
  });
  const drop = h(
    'div',
    { class: 'dropzone', id: 'dropzone', tabindex: '0', role: 'button', 'aria-label': 'Upload files: drop them here or press Enter to choose' },
    'Drop files here to upload to ',
    cwdLabel,
    ' or ',
    h('label', { for: 'upload-input', class: 'link' }, 'choose files'),
    fileInput,
  );
  drop.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' || ev.key === ' ') {
      ev.preventDefault();
      fileInput.click();
    }
  });
  drop.addEventListener('dragover', (ev) => {
    ev.preventDefault();
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (ev) => {
    ev.preventDefault();
    drop.classList.remove('over');
    if (ev.dataTransfer?.files.length) void uploadFiles(ev.dataTransfer.files);
  });

  const newFile = h('form', { class: 'inline', 'aria-label': 'New file' }, h('input', { id: 'new-file', placeholder: 'new-file.py', 'aria-label': 'New file name', autocomplete: 'off', required: true }), h('button', { type: 'submit' }, 'New file'));
  newFile.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const input = newFile.querySelector('input')!;
    const path = input.value.startsWith('/') ? input.value : join(uploadDir, input.value);
    try {
      await request('PUT', sbxPath(id, '/files') + q({ path }), { raw: '' });
      input.value = '';
      await refresh();
      await open(path, 0);
    } catch (e) {
      showError(err, e);
    }
  });

  el.append(
    err,
    h(
      'div',
      { class: 'files' },
      h('div', { class: 'pane tree-pane' }, h('div', { class: 'toolbar' }, h('button', { type: 'button', onclick: () => void refresh() }, 'Refresh')), newFile, drop, progress, tree),
      h('div', { class: 'pane editor-pane' }, h('div', { class: 'toolbar' }, editorTitle, saveBtn), editorHost),
    ),
  );
  void refresh();
  return () => view?.destroy();
}
