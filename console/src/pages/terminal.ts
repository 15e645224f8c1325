// A terminal per session (docs/api.md "Terminal"): xterm.js over GET .../pty, the token
// carried as the WebSocket subprotocol cella.bearer.<base64url> (never in the URL). The
// terminal is fitted to its box and resizes follow; when the connection drops it is made
// again (the shell outlives it; cellad replays its last 64 KiB of output first).
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { api, bearerProtocol, getToken, q, sbxPath, type SessionInfo } from '../api';
import { clear, h, showError } from '../dom';

export function terminalTab(el: HTMLElement, id: string): () => void {
  const err = h('div', { class: 'slot', 'aria-live': 'polite' });
  const session = h('select', { id: 'term-session', 'aria-label': 'Session' });
  const status = h('span', { class: 'muted', id: 'term-status', 'aria-live': 'polite' }, 'connecting…');
  const reconnectBtn = h('button', { type: 'button', id: 'term-reconnect' }, 'Reconnect');
  const newSession = h('button', { type: 'button', id: 'term-new' }, 'New session');
  const host = h('div', { class: 'terminal', id: 'terminal' });
  const term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000, convertEol: false, fontFamily: 'ui-monospace, Menlo, Consolas, monospace' });
  const fit = new FitAddon();
  term.loadAddon(fit);
  let ws: WebSocket | null = null;
  let closedByUs = false;
  let retry = 0;
  let retryTimer = 0;
  const enc = new TextEncoder();

  const send = (data: string | Uint8Array): void => {
    if (ws?.readyState === WebSocket.OPEN) ws.send(data);
  };
  const resize = (): void => {
    try {
      fit.fit();
    } catch {
      /* not laid out yet */
    }
    send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }));
  };

  const connect = (): void => {
    clearTimeout(retryTimer);
    closedByUs = false;
    if (ws) {
      closedByUs = true;
      ws.close();
    }
    try {
      fit.fit();
    } catch {
      /* not laid out yet */
    }
    const token = getToken();
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const url = `${proto}//${location.host}${sbxPath(id, '/pty')}${q({ session: session.value || 'default', cols: term.cols, rows: term.rows })}`;
    const sock = new WebSocket(url, token ? ['cella', bearerProtocol(token)] : []);
    sock.binaryType = 'arraybuffer';
    ws = sock;
    closedByUs = false;
    status.textContent = 'connecting…';
    term.reset(); // the replay redraws what the terminal showed
    sock.onopen = () => {
      status.textContent = 'connected';
      retry = 0;
    };
    sock.onmessage = (ev) => {
      if (typeof ev.data === 'string') {
        try {
          const m = JSON.parse(ev.data) as { type: string; code?: number | string; message?: string };
          if (m.type === 'ready') {
            status.textContent = 'connected';
            resize();
          } else if (m.type === 'exit') status.textContent = `shell exited (${m.code}); reconnect for a new one`;
          else if (m.type === 'error') showError(err, Object.assign(new Error(m.message ?? ''), { code: String(m.code ?? 'ERROR') }));
        } catch {
          /* not JSON */
        }
        return;
      }
      term.write(new Uint8Array(ev.data as ArrayBuffer));
    };
    sock.onclose = (ev) => {
      if (ws !== sock || closedByUs) return;
      ws = null;
      if (ev.code === 1000 && status.textContent?.startsWith('shell exited')) return;
      // a refused upgrade (401, 404...) is a close without a code the page can read: ask the
      // API why on the next try; reconnect with a growing pause otherwise
      retry++;
      const wait = Math.min(30, 2 ** Math.min(retry, 5));
      status.textContent = `disconnected (${ev.code}); reconnecting in ${wait}s`;
      void api('GET', sbxPath(id, '/sessions/' + encodeURIComponent(session.value || 'default'))).catch((e) => {
        if ((e as { code?: string }).code !== 'SESSION_NOT_FOUND') showError(err, e);
      });
      retryTimer = window.setTimeout(connect, wait * 1000);
    };
  };

  term.onData((d) => send(enc.encode(d)));
  term.onBinary((d) => send(Uint8Array.from(d, (c) => c.charCodeAt(0))));
  term.onResize(({ cols, rows }) => send(JSON.stringify({ type: 'resize', cols, rows })));
  const ro = new ResizeObserver(() => {
    try {
      fit.fit();
    } catch {
      /* hidden */
    }
  });

  const loadSessions = async (want?: string): Promise<void> => {
    try {
      const r = await api<{ sessions: SessionInfo[] }>('GET', sbxPath(id, '/sessions'));
      const ids = new Set(['default', ...r.sessions.map((s) => s.id)]);
      if (want) ids.add(want);
      const cur = want ?? (session.value || 'default');
      clear(session);
      for (const s of ids) session.append(h('option', { value: s, selected: s === cur }, s));
    } catch (e) {
      showError(err, e);
    }
  };
  session.addEventListener('change', connect);
  reconnectBtn.addEventListener('click', connect);
  newSession.addEventListener('click', async () => {
    try {
      const s = await api<SessionInfo>('POST', sbxPath(id, '/sessions'), { body: {} });
      await loadSessions(s.id);
      connect();
    } catch (e) {
      showError(err, e);
    }
  });

  el.append(h('div', { class: 'toolbar' }, h('label', { for: 'term-session' }, 'Session'), session, newSession, reconnectBtn, status), err, host);
  term.open(host);
  ro.observe(host);
  session.append(h('option', { value: 'default' }, 'default'));
  void loadSessions().then(connect);
  term.focus();
  return () => {
    clearTimeout(retryTimer);
    closedByUs = true;
    ws?.close();
    ro.disconnect();
    term.dispose();
  };
}
