/**
 * The proxy's per-session keys on keep-alive connections: a connection remembers the key it last
 * authenticated with (src/proxy/server.ts, connectionKeys), which must never let a call reach a session
 * other than the one its own key names, nor a session that was removed.
 */
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { after, before, test } from 'node:test';
import type { Backend } from '../../../src/backends/types.ts';
import { ProxyServer, type ProxySession } from '../../../src/proxy/server.ts';

/** a session whose model names it: the model list the proxy answers with says which session it reached */
function session(id: string, key: string): ProxySession {
  return {
    id,
    key,
    model: `model-of-${id}`,
    backend: {} as Backend,
    state: new Map(),
    complete: () => {},
  };
}

let proxy: ProxyServer;
let url: string;
before(async () => {
  proxy = new ProxyServer();
  url = (await proxy.listen()).url;
});
after(() => proxy.close(1000));

/** GET /v1/models on the agent's one connection: the status, the model named and whether the socket was reused */
function models(agent: Agent, key: string): Promise<{ status: number; model: string; reused: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v1/models`, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        text += d;
      });
      res.on('end', () => {
        const model = res.statusCode === 200 ? JSON.stringify(JSON.parse(text)) : '';
        resolve({ status: res.statusCode ?? 0, model, reused: req.reusedSocket });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

test('one keep-alive connection presenting different keys reaches each key own session, and no removed one', async () => {
  const a = session('a', 'polar-key-aaaaaaaaaaaaaaaa');
  const b = session('b', 'polar-key-bbbbbbbbbbbbbbbb');
  proxy.addSession(a);
  proxy.addSession(b);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const first = await models(agent, a.key);
    assert.equal(first.status, 200);
    assert.match(first.model, /model-of-a/);
    const second = await models(agent, b.key);
    assert.equal(second.reused, true, 'the same connection');
    assert.equal(second.status, 200);
    assert.match(second.model, /model-of-b/);
    const third = await models(agent, a.key);
    assert.equal(third.reused, true);
    assert.match(third.model, /model-of-a/);
    // the key this connection authenticated with last, once its session is gone
    proxy.removeSession(a.key);
    const gone = await models(agent, a.key);
    assert.equal(gone.reused, true);
    assert.equal(gone.status, 401);
  } finally {
    agent.destroy();
  }
  // a key that differs from the connection's last one only in its end is refused
  const other = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    assert.equal((await models(other, b.key)).status, 200);
    const near = await models(other, `${b.key.slice(0, -1)}c`);
    assert.equal(near.reused, true);
    assert.equal(near.status, 401);
  } finally {
    other.destroy();
    proxy.removeSession(b.key);
  }
});
