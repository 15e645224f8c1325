// The console's shell: the login form when cellad wants a token, the header and the hash
// router (#/sandboxes, #/sandbox/NAME/TAB, #/images). A page is a function that fills the
// main element and returns its cleanup (timers, sockets), called when the route changes.
import './style.css';
import '@xterm/xterm/css/xterm.css';
import { ApiError, api, getToken, setToken } from './api';
import { clear, errorBox, h, showError } from './dom';
import { sandboxesPage } from './pages/sandboxes';
import { sandboxPage } from './pages/sandbox';
import { imagesPage } from './pages/images';

export type Cleanup = () => void;
export type Page = (main: HTMLElement, args: string[]) => Cleanup | void;

const app = document.getElementById('app')!;
let cleanup: Cleanup | void;
let authRequired = false;

function header(): HTMLElement {
  const nav = h(
    'nav',
    { class: 'nav', 'aria-label': 'Main' },
    h('a', { href: '#/sandboxes', 'data-nav': 'sandboxes' }, 'Sandboxes'),
    h('a', { href: '#/images', 'data-nav': 'images' }, 'Images'),
  );
  if (authRequired)
    nav.append(
      h(
        'button',
        {
          type: 'button',
          class: 'link',
          onclick: () => {
            setToken(null);
            void start();
          },
        },
        'Log out',
      ),
    );
  return h('header', { class: 'top', role: 'banner' }, h('a', { class: 'brand', href: '#/sandboxes' }, 'cella'), nav);
}

function route(main: HTMLElement): void {
  if (cleanup) cleanup();
  cleanup = undefined;
  clear(main);
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const [page, ...args] = parts;
  for (const a of document.querySelectorAll('[data-nav]'))
    a.toggleAttribute('aria-current', a.getAttribute('data-nav') === (page === 'sandbox' ? 'sandboxes' : page || 'sandboxes'));
  try {
    if (page === 'sandbox' && args[0]) cleanup = sandboxPage(main, args);
    else if (page === 'images') cleanup = imagesPage(main, args);
    else cleanup = sandboxesPage(main, args);
  } catch (e) {
    main.append(errorBox(e));
  }
}

function shell(): void {
  clear(app);
  const main = h('main', { id: 'main', tabindex: '-1' });
  app.append(header(), main);
  window.onhashchange = () => route(main);
  route(main);
}

function loginForm(first: ApiError | null): void {
  clear(app);
  const input = h('input', {
    id: 'token',
    type: 'password',
    name: 'token',
    autocomplete: 'current-password',
    required: true,
    'aria-describedby': 'login-help',
  });
  const err = h('div', { class: 'slot', 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'login', 'aria-labelledby': 'login-title' },
    h('h1', { id: 'login-title' }, 'cella'),
    h('p', { id: 'login-help' }, 'This cellad needs a token: its CELLA_TOKEN, or a tenant\'s API key.'),
    h('label', { for: 'token' }, 'Token'),
    input,
    h('button', { type: 'submit' }, 'Log in'),
    err,
  );
  if (first && getToken()) showError(err, first);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const token = input.value.trim();
    showError(err, null);
    try {
      await api('GET', '/v1/sandboxes', { token });
      setToken(token);
      shell();
    } catch (e) {
      showError(err, e);
      input.select();
    }
  });
  app.append(h('main', { id: 'main' }, form));
  input.focus();
}

/** Does cellad answer with the token kept (or none)? Else the login form. */
async function start(): Promise<void> {
  try {
    await api('GET', '/v1/sandboxes');
    authRequired = getToken() !== null;
    shell();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      authRequired = true;
      loginForm(e);
      return;
    }
    clear(app);
    app.append(
      h('main', { id: 'main' }, errorBox(e), h('button', { type: 'button', onclick: () => void start() }, 'Retry')),
    );
  }
}

window.addEventListener('unhandledrejection', (ev) => {
  const main = document.getElementById('main');
  if (main) main.prepend(errorBox(ev.reason));
});

void start();
