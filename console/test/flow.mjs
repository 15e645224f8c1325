// The console end to end (tests/integration/test-console.sh runs it against a real cellad
// with a token): Debian's chromium driven headless by playwright-core. The login form
// refuses a wrong token and takes the right one; a sandbox is created; a file uploaded
// through the file input and another dropped on the drop zone show up in the tree; one is
// edited and saved in the editor and read back through the API; `echo hi` typed in the
// terminal prints hi; a python http.server started as a process and its port exposed
// answers its directory listing at the preview link (a new tab); a matplotlib cell shows
// its PNG; the sandbox is destroyed. Every page is shot at 1280x800 and 375x667 into
// $SHOTS and checked for layout breakage (nothing wider than the viewport outside a box
// that scrolls, the header and main visible and apart), and no console error or CSP
// violation may occur (but the wrong token's 401).
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

const URL_ = process.env.CELLA_URL;
const TOKEN = process.env.CELLA_TOKEN;
const NAME = process.env.SANDBOX;
const SHOTS = process.env.SHOTS;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const IMPORT_TAR = process.env.IMPORT_TAR; // a docker save tarball for the images page
if (!URL_ || !TOKEN || !NAME || !SHOTS) throw new Error('CELLA_URL, CELLA_TOKEN, SANDBOX and SHOTS are needed');
mkdirSync(SHOTS, { recursive: true });

const T = 60_000; // a generous bound on each wait (never a timing assertion)
let step = 'start';
const log = (s) => {
  step = s;
  console.log(`console-flow: ${s}`);
};
function check(cond, msg) {
  if (!cond) throw new Error(`${step}: ${msg}`);
}
const apiGet = async (path) => {
  const r = await fetch(URL_ + path, { headers: { Authorization: `Bearer ${TOKEN}` } });
  return { status: r.status, text: await r.text() };
};

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  // as root chromium's own sandbox cannot start: --no-sandbox (the test's pages are ours)
  args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
});
const errors = [];
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
const watch = (page) => {
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push({ step, text: m.text() });
  });
  page.on('pageerror', (e) => errors.push({ step, text: `pageerror: ${e.message}` }));
  page.on('dialog', (d) => void d.accept(d.type() === 'prompt' ? d.defaultValue() : undefined));
};
const page = await context.newPage();
watch(page);
await page.addInitScript(() => {
  document.addEventListener('securitypolicyviolation', (e) => {
    console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`);
  });
});

/** Layout checks of what the page shows now, then a screenshot NAME-WxH.png. */
async function shoot(name) {
  const vp = page.viewportSize();
  await page.waitForTimeout(300); // let layout settle before the picture (not an assertion)
  const file = `${SHOTS}/${name}-${vp.width}x${vp.height}.png`;
  await page.screenshot({ path: file, fullPage: true });
  const r = await page.evaluate(() => {
    const vw = document.documentElement.clientWidth;
    const out = { scrollWidth: document.documentElement.scrollWidth, vw, overflow: [], landmarks: {} };
    const scrolls = (el) => {
      for (let p = el.parentElement; p; p = p.parentElement) {
        const ox = getComputedStyle(p).overflowX;
        if (ox === 'auto' || ox === 'scroll' || ox === 'hidden' || ox === 'clip') return true;
      }
      return false;
    };
    for (const el of document.body.querySelectorAll('*')) {
      const b = el.getBoundingClientRect();
      if (b.width === 0 || b.height === 0) continue;
      if ((b.right > vw + 1 || b.left < -1) && !scrolls(el) && !el.closest('.visually-hidden'))
        out.overflow.push(`${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}.${el.className} [${Math.round(b.left)}, ${Math.round(b.right)}]`);
    }
    for (const sel of ['header.top', 'main', 'h1']) {
      const el = document.querySelector(sel);
      const b = el?.getBoundingClientRect();
      out.landmarks[sel] = b ? { top: b.top, bottom: b.bottom, left: b.left, right: b.right, w: b.width, h: b.height } : null;
    }
    return out;
  });
  check(r.scrollWidth <= r.vw + 1, `${name}: the page scrolls sideways (${r.scrollWidth} > ${r.vw})`);
  check(r.overflow.length === 0, `${name}: elements past the viewport: ${r.overflow.slice(0, 5).join('; ')}`);
  const { 'header.top': hd, main, h1 } = r.landmarks;
  if (name !== 'login') {
    check(hd && hd.h > 0 && hd.w > 0, `${name}: no header`);
    check(main && main.top >= hd.bottom - 1, `${name}: main overlaps the header`);
  }
  check(h1 && h1.h > 0 && h1.w > 0 && h1.right <= r.vw + 1, `${name}: no visible h1`);
  console.log(`console-flow: shot ${file}`);
}

const tab = async (key) => {
  await page.click(`#tablink-${key}`);
  await page.waitForSelector(`#tab-${key}`, { timeout: T });
};

try {
  // ---- login ----
  log('login form');
  const resp = await page.goto(URL_ + '/', { waitUntil: 'domcontentloaded' });
  check(page.url().endsWith('/console/'), `/ did not redirect to /console/: ${page.url()}`);
  const csp = resp.headers()['content-security-policy'] ?? '';
  check(csp.includes("script-src 'self'") && csp.includes("frame-ancestors 'none'"), `CSP: ${csp}`);
  await page.waitForSelector('#token', { timeout: T });
  await shoot('login');
  log('a wrong token is refused');
  await page.fill('#token', 'not-the-token');
  await page.click('form.login button[type=submit]');
  await page.waitForSelector('form.login .error', { timeout: T });
  const refused = await page.textContent('form.login .error');
  check(refused.includes('UNAUTHORIZED'), `wrong token: ${refused}`);
  check(!(await page.evaluate(() => sessionStorage.getItem('cella.token'))), 'a refused token was kept');
  const expected401 = errors.length; // the browser logs the 401 it was answered
  log('the right token');
  await page.fill('#token', TOKEN);
  await page.click('form.login button[type=submit]');
  await page.waitForSelector('table#sandboxes', { timeout: T });
  check(!page.url().includes(TOKEN), 'the token is in the URL');
  errors.splice(0, expected401);

  // ---- create ----
  log('create a sandbox');
  await shoot('sandboxes');
  await page.fill('#new-name', NAME);
  await page.selectOption('#new-type', 'standard-1');
  await page.fill('#new-labels', 'made-by=console-test');
  await page.click('form.create button[type=submit]');
  await page.waitForSelector('#file-tree li', { timeout: T });
  check(decodeURIComponent(page.url()).includes(`#/sandbox/${NAME}/files`), `after create: ${page.url()}`);

  // ---- upload: file input, then drag and drop ----
  log('upload with the file input');
  await page.setInputFiles('#upload-input', { name: 'hello.py', mimeType: 'text/x-python', buffer: Buffer.from("print('hello')\n") });
  await page.waitForSelector('#file-tree li[data-name="hello.py"]', { timeout: T });
  await page.waitForSelector('#uploads .upload.done[data-upload="hello.py"]', { timeout: T });
  log('upload by drag and drop');
  const dt = await page.evaluateHandle(() => {
    const d = new DataTransfer();
    d.items.add(new File(['dropped\n'.repeat(1000)], 'drop.txt', { type: 'text/plain' }));
    return d;
  });
  await page.dispatchEvent('#dropzone', 'dragover', { dataTransfer: dt });
  await page.dispatchEvent('#dropzone', 'drop', { dataTransfer: dt });
  await page.waitForSelector('#file-tree li[data-name="drop.txt"]', { timeout: T });
  const dropped = await apiGet(`/v1/sandboxes/${NAME}/files?path=/workspace/drop.txt`);
  check(dropped.status === 200 && dropped.text === 'dropped\n'.repeat(1000), `drop.txt through the API: ${dropped.status}`);

  // ---- edit and save ----
  log('edit and save');
  await page.click('#file-tree button.entry[data-path="/workspace/hello.py"]');
  await page.waitForSelector('#editor .cm-content', { timeout: T });
  await page.waitForFunction(() => document.querySelector('#editor .cm-content')?.textContent?.includes("print('hello')"), null, { timeout: T });
  await shoot('files');
  await page.click('#editor .cm-content');
  await page.keyboard.press('Control+End');
  await page.keyboard.type("print('edited in the console')");
  await page.keyboard.press('Control+s');
  await page.waitForFunction(() => document.querySelector('#save')?.textContent === 'Saved', null, { timeout: T });
  const saved = await apiGet(`/v1/sandboxes/${NAME}/files?path=/workspace/hello.py`);
  check(saved.status === 200 && saved.text === "print('hello')\nprint('edited in the console')", `hello.py through the API: ${saved.status} ${JSON.stringify(saved.text)}`);

  // ---- terminal ----
  log('terminal: echo hi');
  await tab('terminal');
  await page.waitForFunction(() => document.querySelector('#term-status')?.textContent === 'connected', null, { timeout: T });
  await page.waitForFunction(() => /[$#]\s*$/m.test(document.querySelector('#terminal .xterm-rows')?.textContent ?? ''), null, { timeout: T });
  await page.click('#terminal');
  await page.keyboard.type('echo hi');
  await page.keyboard.press('Enter');
  await page.waitForFunction(
    () => Array.from(document.querySelectorAll('#terminal .xterm-rows > div')).some((r) => r.textContent.trim() === 'hi'),
    null,
    { timeout: T },
  );
  await shoot('terminal');
  log('terminal: a new connection replays what the shell showed');
  await page.click('#term-reconnect');
  await page.waitForFunction(() => document.querySelector('#term-status')?.textContent === 'connected', null, { timeout: T });
  await page.waitForFunction(
    () => Array.from(document.querySelectorAll('#terminal .xterm-rows > div')).some((r) => r.textContent.trim() === 'hi'),
    null,
    { timeout: T },
  );

  // ---- process, port, preview ----
  log('start python3 -m http.server 8000');
  await tab('processes');
  await page.fill('#proc-command', 'python3 -m http.server 8000');
  await page.click('form[aria-label="Start a process"] button');
  await page.waitForSelector('#processes tr[data-process]', { timeout: T });
  await page.waitForFunction(() => /running/.test(document.querySelector('#processes tbody')?.textContent ?? ''), null, { timeout: T });
  await shoot('processes');
  log('expose port 8000 and open the preview link');
  await tab('ports');
  await page.fill('#port-number', '8000');
  await page.click('form[aria-label="Expose a port"] button');
  await page.waitForSelector('#ports a.preview', { timeout: T });
  await shoot('ports');
  const href = await page.getAttribute('#ports a.preview', 'href');
  check((await page.getAttribute('#ports a.preview', 'target')) === '_blank', 'the preview link does not open a new tab');
  const [preview] = await Promise.all([context.waitForEvent('page', { timeout: T }), page.click('#ports a.preview')]);
  let listing = '';
  for (let i = 0; i < 60 && !listing.includes('hello.py'); i++) {
    try {
      await preview.waitForLoadState('domcontentloaded', { timeout: T });
      listing = (await preview.textContent('body')) ?? '';
    } catch {
      listing = '';
    }
    if (!listing.includes('hello.py')) {
      await preview.waitForTimeout(1000); // the server may still be starting
      await preview.goto(href).catch(() => {});
    }
  }
  check(listing.includes('Directory listing') && listing.includes('hello.py'), `preview ${href}: ${listing.slice(0, 300)}`);
  await preview.close();

  // ---- notebook ----
  log('a matplotlib cell shows its image');
  await tab('notebook');
  await page.click('#cells .cell button.run');
  await page.waitForSelector('#cells .cell-out img[src^="data:image/png;base64,"]', { timeout: 180_000 });
  const w = await page.evaluate(async () => {
    const img = document.querySelector('#cells .cell-out img');
    await img.decode();
    return img.naturalWidth;
  });
  check(w > 100, `the figure is ${w} px wide`);
  log('a pandas DataFrame shows as a table');
  await page.click('#add-cell');
  await page.fill('#cells .cell:nth-child(2) textarea', 'import pandas as pd\npd.DataFrame({"col": [1, 2]})');
  await page.click('#cells .cell:nth-child(2) button.run');
  await page.waitForSelector('#cells .cell:nth-child(2) .html table', { timeout: T });
  log('a cell that raises shows its traceback');
  await page.click('#add-cell');
  await page.fill('#cells .cell:nth-child(3) textarea', 'def f():\n    return 1 / 0\nf()');
  await page.click('#cells .cell:nth-child(3) button.run');
  await page.waitForSelector('#cells .cell:nth-child(3) .traceback', { timeout: T });
  const tb = await page.textContent('#cells .cell:nth-child(3) .traceback');
  check(tb.includes('ZeroDivisionError'), `traceback: ${tb}`);
  await shoot('notebook');

  // ---- settings, snapshots, images ----
  log('env and labels');
  await tab('settings');
  await page.fill('#env-key', 'GREETING');
  await page.fill('#env-value', 'hello');
  await page.click('form[aria-label="Set variable"] button');
  await page.waitForFunction(() => document.querySelector('#env')?.textContent?.includes('GREETING'), null, { timeout: T });
  await page.waitForFunction(() => document.querySelector('#labels')?.textContent?.includes('made-by'), null, { timeout: T });
  await shoot('settings');
  await tab('snapshots');
  await page.waitForSelector('#snapshots tbody tr', { timeout: T });
  await shoot('snapshots');
  log('images');
  await page.click('a[data-nav=images]');
  await page.waitForSelector('#images tr[data-image="default"]', { timeout: T });
  log('images: a build with its live log and progress');
  await page.fill('#build-name', 'consolebuild');
  await page.fill('#build-packages', 'busybox-static');
  await page.click('form[aria-label="Build an image"] button');
  await page.waitForSelector('#images tr[data-image="consolebuild"]', { timeout: T });
  const blog = await page.textContent('#build-log');
  check(blog.includes('fake build of consolebuild: busybox-static') && blog.includes('I: extracting archives'), `build log: ${blog}`);
  check(await page.evaluate(() => { const p = document.querySelector('#build-progress'); return p.value === p.max; }), 'the build progress is not full');
  if (IMPORT_TAR) {
    log('images: import a tarball with upload progress, then delete it');
    await page.fill('#import-name', 'consoleimport');
    await page.setInputFiles('#import-file', IMPORT_TAR);
    await page.click('form[aria-label="Import an image"] button');
    await page.waitForSelector('#images tr[data-image="consoleimport"]', { timeout: T });
    check(await page.evaluate(() => document.querySelector('#import-progress').value === 100), 'the upload progress is not full');
    await page.click('#images tr[data-image="consoleimport"] button.danger');
    await page.waitForFunction(() => !document.querySelector('#images tr[data-image="consoleimport"]'), null, { timeout: T });
  }
  await shoot('images');

  // ---- the same pages on a phone ----
  log('phone-sized viewport');
  await page.setViewportSize({ width: 375, height: 667 });
  await shoot('images');
  await page.click('a[data-nav=sandboxes]');
  await page.waitForSelector(`#sandboxes tr[data-sandbox="${NAME}"]`, { timeout: T });
  await shoot('sandboxes');
  await page.goto(`${URL_}/console/#/sandbox/${NAME}/files`);
  await page.waitForSelector('#file-tree li[data-name="hello.py"]', { timeout: T });
  await shoot('files');
  for (const key of ['terminal', 'processes', 'ports', 'notebook', 'settings', 'snapshots']) {
    await tab(key);
    if (key === 'terminal') await page.waitForFunction(() => document.querySelector('#term-status')?.textContent === 'connected', null, { timeout: T });
    await shoot(key);
  }

  // ---- sleep and wake (POST /sleep, decision 0063) ----
  log('sleep and wake from the sandboxes page, by the keyboard');
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.click('a[data-nav=sandboxes]');
  const row = `#sandboxes tr[data-sandbox="${NAME}"]`;
  await page.waitForSelector(`${row} button[data-action=sleep]`, { timeout: T });
  await page.focus(`${row} button[data-action=sleep]`);
  await page.keyboard.press('Enter');
  await page.waitForFunction(([n, st]) => document.querySelector(`#sandboxes tr[data-sandbox="${n}"] .state`)?.textContent === st, [NAME, 'sleeping'], { timeout: T });
  const slept = await apiGet(`/v1/sandboxes/${NAME}`);
  check(slept.status === 200 && JSON.parse(slept.text).state === 'sleeping', `after Sleep: ${slept.status} ${slept.text}`);
  await page.waitForSelector(`${row} button[data-action=wake]`, { timeout: T });
  await page.click(`${row} button[data-action=wake]`);
  await page.waitForFunction(([n, st]) => document.querySelector(`#sandboxes tr[data-sandbox="${n}"] .state`)?.textContent === st, [NAME, 'running'], { timeout: T });
  log('sleep from the sandbox page');
  await page.goto(`${URL_}/console/#/sandbox/${NAME}/settings`);
  await page.waitForSelector('#sleep', { timeout: T });
  await page.click('#sleep');
  await page.waitForFunction(() => document.querySelector('.summary .state')?.textContent === 'sleeping', null, { timeout: T });

  // ---- destroy ----
  log('destroy the sandbox');
  await page.click('#destroy');
  await page.waitForSelector('table#sandboxes', { timeout: T });
  await page.waitForFunction((n) => !document.querySelector(`#sandboxes tr[data-sandbox="${n}"]`), NAME, { timeout: T });
  const gone = await apiGet(`/v1/sandboxes/${NAME}`);
  check(gone.status === 404, `after destroy: ${gone.status} ${gone.text}`);

  log('no console errors, no CSP violations');
  check(errors.length === 0, `console errors: ${JSON.stringify(errors.slice(0, 5))}`);
  console.log('console-flow: all passed');
} catch (e) {
  await page.screenshot({ path: `${SHOTS}/failure.png`, fullPage: true }).catch(() => {});
  console.error(`console-flow: FAILED at "${step}": ${e?.stack ?? e}`);
  if (errors.length) console.error(`console errors: ${JSON.stringify(errors.slice(0, 10))}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
