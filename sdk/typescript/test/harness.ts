// Test harness of the SDK's node:test suites: the daemon they talk to and the way to
// restart it. tests/integration/test-sdk-typescript.sh starts a real cellad (auth on, a
// fixed loopback port) and runs `node --test` on build-test/test/*.test.js with:
//
//   CELLA_URL          the daemon, e.g. http://127.0.0.1:41234 (unset: tests skip)
//   CELLA_TOKEN        its bearer token
//   CELLA_TEST_PREFIX  the run's sandbox name prefix (it-<run>-); name sandboxes with
//                      sandboxName() so the run's leak checks and cleanup find them
//   CELLA_CTL          a directory with two FIFOs, req and ack: restartDaemon() writes a
//                      request line to req, the script restarts cellad (same data dir,
//                      same port) and answers `ok` or `error <message>` on ack
//   CELLA_BUILD        the CMake build directory (cellad, cella)
//
// Only node: built-ins here, so the file compiles before and apart from the SDK.
import { open as fsOpen, close as fsClose, readSync, constants } from "node:fs";
import { open } from "node:fs/promises";
import { Socket } from "node:net";
import { promisify } from "node:util";

const openFd = promisify(fsOpen);
const closeFd = promisify(fsClose);

export interface HarnessEnv {
  /** false when CELLA_URL is unset: daemon tests should skip. */
  available: boolean;
  url: string;
  token: string;
  prefix: string;
  ctl: string;
  build: string;
}

function readEnv(): HarnessEnv {
  const e = process.env;
  const url = (e.CELLA_URL ?? "").replace(/\/+$/, "");
  return {
    available: url !== "",
    url,
    token: e.CELLA_TOKEN ?? "",
    prefix: (e.CELLA_TEST_PREFIX ?? `sdk-${process.pid}-`).toLowerCase(),
    ctl: e.CELLA_CTL ?? "",
    build: e.CELLA_BUILD ?? "",
  };
}

export const env: HarnessEnv = readEnv();

/** Whether restartDaemon() can work (the tests run under test-sdk-typescript.sh). */
export const canRestart: boolean = env.available && env.ctl !== "";

const NAME_MAX = 63;

/**
 * A sandbox name of this run: `${prefix}${suffix}`, lower case, at most 63 characters of
 * [a-z0-9-] (a longer suffix is cut; characters outside the set become `-`).
 */
export function sandboxName(suffix: string): string {
  const clean = suffix.toLowerCase().replace(/[^a-z0-9-]/g, "-");
  const name = `${env.prefix}${clean}`.slice(0, NAME_MAX).replace(/-+$/, "");
  if (name === "" || !/^[a-z0-9][a-z0-9-]*$/.test(name)) {
    throw new Error(`sandboxName: cannot make a valid name of '${env.prefix}' + '${suffix}'`);
  }
  return name;
}

export interface ApiAnswer {
  status: number;
  /** The body parsed as JSON, or undefined when it is empty or not JSON. */
  json: any;
  /** The body as text. */
  text: string;
}

/**
 * A raw request to the daemon (beneath the SDK): `path` is relative to CELLA_URL (e.g.
 * `/v1/health`); an object body is sent as JSON. The token is sent unless `auth: false`.
 */
export async function api(
  method: string,
  path: string,
  body?: unknown,
  opts: { auth?: boolean; headers?: Record<string, string> } = {},
): Promise<ApiAnswer> {
  if (!env.available) throw new Error("api: CELLA_URL is not set");
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.auth !== false && env.token !== "") headers.Authorization = `Bearer ${env.token}`;
  let payload: string | undefined;
  if (body !== undefined) {
    payload = typeof body === "string" ? body : JSON.stringify(body);
    headers["Content-Type"] ??= "application/json";
  }
  const res = await fetch(env.url + path, { method, headers, body: payload ?? null });
  const text = await res.text();
  let json: any;
  try {
    json = text === "" ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

/** DELETE every sandbox whose id starts with this run's prefix. */
export async function cleanupSandboxes(): Promise<void> {
  const list = await api("GET", "/v1/sandboxes");
  if (list.status !== 200) throw new Error(`cleanupSandboxes: GET /v1/sandboxes ${list.status}: ${list.text}`);
  const ids: string[] = ((list.json?.sandboxes ?? []) as Array<{ id?: unknown }>)
    .map((s) => (typeof s.id === "string" ? s.id : ""))
    .filter((id) => id !== "" && id.startsWith(env.prefix));
  for (const id of ids) {
    const r = await api("DELETE", `/v1/sandboxes/${encodeURIComponent(id)}`);
    if (r.status !== 200 && r.status !== 404) {
      throw new Error(`cleanupSandboxes: DELETE ${id}: ${r.status} ${r.text}`);
    }
  }
}

/** Poll GET /v1/health until it answers 200 (after a restart, say). */
export async function waitHealthy(timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  for (;;) {
    try {
      const r = await api("GET", "/v1/health", undefined, { auth: false });
      if (r.status === 200 && r.json?.status === "ok") return;
      last = `${r.status} ${r.text}`;
    } catch (err) {
      last = String(err);
    }
    if (Date.now() > deadline) throw new Error(`daemon not healthy after ${timeoutMs} ms: ${last}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export type RestartKind = "restart" | "kill9-restart";

const RESTART_TIMEOUT_MS = 60_000;
let restartQueue: Promise<void> = Promise.resolve();

/**
 * Have the test script restart cellad: SIGKILL, then start again on the same data dir and
 * port (both kinds do that today; `restart` is kept for a gentler restart later). Resolves
 * once the new daemon is listening; throws on an `error ...` answer or after 60 s.
 * Calls are serialized within a test file.
 */
export function restartDaemon(kind: RestartKind = "kill9-restart"): Promise<void> {
  const run = restartQueue.then(() => restartOnce(kind));
  restartQueue = run.catch(() => undefined);
  return run;
}

async function restartOnce(kind: RestartKind): Promise<void> {
  if (!canRestart) throw new Error("restartDaemon: CELLA_CTL is not set (not run by test-sdk-typescript.sh)");
  const reqPath = `${env.ctl}/req`;
  const ackPath = `${env.ctl}/ack`;
  // The script holds both FIFOs open read-write, so neither open blocks; O_NONBLOCK makes
  // them fail (ENXIO for req) instead of hanging if the script is gone.
  const ackFd = await openFd(ackPath, constants.O_RDONLY | constants.O_NONBLOCK);
  let sock: Socket | undefined;
  try {
    drainStale(ackFd);
    const req = await open(reqPath, constants.O_WRONLY | constants.O_NONBLOCK);
    try {
      await req.write(`${kind}\n`);
    } finally {
      await req.close();
    }
    sock = new Socket({ fd: ackFd, readable: true, writable: false });
    const line = await readLine(sock, RESTART_TIMEOUT_MS);
    if (line === "ok") return;
    if (line.startsWith("error")) throw new Error(`restartDaemon(${kind}): ${line.slice(5).trim() || "failed"}`);
    throw new Error(`restartDaemon(${kind}): unexpected answer '${line}'`);
  } finally {
    if (sock) sock.destroy();
    else await closeFd(ackFd).catch(() => undefined);
  }
}

/** Drop whatever is waiting in the ack FIFO (an answer to a request that timed out). */
function drainStale(fd: number): void {
  const buf = Buffer.alloc(4096);
  for (;;) {
    try {
      if (readSync(fd, buf, 0, buf.length, null) <= 0) return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EAGAIN") return;
      throw err;
    }
  }
}

function readLine(sock: Socket, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = "";
    const done = (err: Error | null, line?: string): void => {
      clearTimeout(timer);
      sock.off("data", onData);
      sock.off("end", onEnd);
      sock.off("error", onError);
      sock.pause();
      if (err) reject(err);
      else resolve(line ?? "");
    };
    const onData = (chunk: Buffer): void => {
      data += chunk.toString("utf8");
      const nl = data.indexOf("\n");
      if (nl >= 0) done(null, data.slice(0, nl).trim());
    };
    const onEnd = (): void => done(new Error("restartDaemon: the test script closed the ack FIFO"));
    const onError = (err: Error): void => done(err);
    const timer = setTimeout(
      () => done(new Error(`restartDaemon: no answer within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
    sock.on("data", onData);
    sock.on("end", onEnd);
    sock.on("error", onError);
  });
}
