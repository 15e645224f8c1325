// The plumbing of the SDK suites, end to end: the daemon answers, auth is on, the test
// script restarts the daemon on request at the same URL, and a sandbox outlives that.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { env, canRestart, api, sandboxName, restartDaemon, cleanupSandboxes } from "./harness.js";

const skip = !env.available;

after(async () => {
  if (env.available) await cleanupSandboxes();
});

test("sandboxName: prefix, lower case, at most 63 characters", () => {
  assert.equal(sandboxName("Abc"), `${env.prefix}abc`);
  const long = sandboxName("x".repeat(100));
  assert.ok(long.length <= 63, long);
  assert.match(long, /^[a-z0-9][a-z0-9-]*$/);
});

test("health answers ok", { skip }, async () => {
  const r = await api("GET", "/v1/health");
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.status, "ok");
});

test("auth is on: no token is 401, the token is 200", { skip }, async () => {
  const without = await api("GET", "/v1/sandboxes", undefined, { auth: false });
  assert.equal(without.status, 401, without.text);
  assert.equal(without.json?.code, "UNAUTHORIZED");
  const wrong = await api("GET", "/v1/sandboxes", undefined, {
    auth: false,
    headers: { Authorization: "Bearer not-the-token" },
  });
  assert.equal(wrong.status, 401, wrong.text);
  const withToken = await api("GET", "/v1/sandboxes");
  assert.equal(withToken.status, 200, withToken.text);
});

test("restartDaemon: same URL, the sandbox is still there", { skip: !canRestart }, async () => {
  const name = sandboxName("harness");
  const put = await api("PUT", `/v1/sandboxes/${name}`, {});
  assert.ok(put.status === 201 || put.status === 200, `PUT ${put.status}: ${put.text}`);
  const before = await api("GET", "/v1/health");
  assert.equal(before.status, 200);

  await restartDaemon();
  const health = await api("GET", "/v1/health");
  assert.equal(health.status, 200, health.text);
  assert.equal(health.json.status, "ok");
  const list = await api("GET", "/v1/sandboxes");
  assert.equal(list.status, 200, list.text);
  const ids = (list.json.sandboxes as Array<{ id: string }>).map((s) => s.id);
  assert.ok(ids.includes(name), `${name} not in ${JSON.stringify(ids)}`);

  // a second restart in a row works as well (the FIFOs are reusable)
  await restartDaemon("restart");
  const again = await api("GET", `/v1/sandboxes/${name}`);
  assert.equal(again.status, 200, again.text);
});
