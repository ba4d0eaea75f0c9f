/** The HTTP kit over real requests on 127.0.0.1: routes as a table, JSON bodies with limits, error mapping. */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { InputError } from '../../../src/errors.ts';
import { errorReply, HttpError } from '../../../src/http/errors.ts';
import { readJson } from '../../../src/http/reply.ts';
import { dispatch, matchRoute, pathOf, type Route } from '../../../src/http/router.ts';
import { HttpServer } from '../../../src/http/server.ts';
import { DEFAULTS } from '../../../src/options/defaults.ts';
import { ProtocolError } from '../../../src/protocols/errors.ts';

const routes: Route[] = [
  { method: 'GET', path: '/items', handler: () => ({ status: 200, body: { items: [] } }) },
  {
    method: 'POST',
    path: '/items',
    handler: async ({ req }) => ({ status: 201, body: { got: await readJson(req, 64, { empty: {} }) } }),
  },
  {
    method: 'GET',
    path: /^\/items\/([^/]+)$/,
    handler: ({ params, query }) => {
      if (params[0] === 'missing') throw new HttpError(404, 'no item missing', 'not_found_error');
      if (params[0] === 'bad') throw new InputError('rows.jsonl', 3, 'repo', 'not owner/name');
      if (params[0] === 'boom') throw new Error('kaput');
      return { status: 200, body: { id: params[0], q: query.get('q') } };
    },
  },
];

describe('http kit', () => {
  let server: HttpServer;
  let url: string;
  before(async () => {
    server = new HttpServer(async (req, res) => {
      if (await dispatch(routes, req, res)) return;
      req.resume();
      throw new HttpError(404, `no route for ${req.method} ${pathOf(req.url)}`, 'not_found_error');
    });
    url = (await server.listen(0, '127.0.0.1')).url;
  });
  after(() => server.close(1000));

  const call = async (path: string, init: RequestInit = {}) => {
    const r = await fetch(`${url}${path}`, init);
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  const message = (body: Record<string, unknown>) => (body.error as { message: string }).message;

  test('routes answer from the table, with decoded params and the query', async () => {
    assert.deepEqual(await call('/items/'), { status: 200, body: { items: [] } });
    assert.deepEqual(await call('/items/a%20b?q=1'), { status: 200, body: { id: 'a b', q: '1' } });
  });

  test('a known path under another method is 405; an unknown path falls through', async () => {
    const r = await call('/items', { method: 'DELETE' });
    assert.equal(r.status, 405);
    assert.match(message(r.body), /DELETE \/items.*GET, POST/);
    assert.equal((await call('/nothing')).status, 404);
  });

  test('JSON bodies: parsed, empty allowed, over the limit 413, not JSON 400', async () => {
    assert.deepEqual((await call('/items', { method: 'POST', body: '{"a":1}' })).body, { got: { a: 1 } });
    assert.deepEqual((await call('/items', { method: 'POST', body: '' })).body, { got: {} });
    const big = await call('/items', { method: 'POST', body: JSON.stringify({ a: 'x'.repeat(100) }) });
    assert.equal(big.status, 413);
    assert.match(message(big.body), /over the limit of 64 bytes/);
    const bad = await call('/items', { method: 'POST', body: '{nope' });
    assert.equal(bad.status, 400);
    assert.match(message(bad.body), /not valid JSON/);
  });

  test('errors map to statuses: HttpError keeps its own, PolarError 400, anything else 500', async () => {
    const missing = await call('/items/missing');
    assert.deepEqual(missing, {
      status: 404,
      body: { error: { message: 'no item missing', type: 'not_found_error' } },
    });
    const bad = await call('/items/bad');
    assert.equal(bad.status, 400);
    assert.equal(message(bad.body), 'rows.jsonl:3: repo: not owner/name');
    const boom = await call('/items/boom');
    assert.equal(boom.status, 500);
    assert.equal((boom.body.error as { type: string }).type, 'server_error');
  });
});

describe('http kit pieces', () => {
  test('errorReply: a ProtocolError answers with its fault status', () => {
    const reply = errorReply(new ProtocolError('messages[0]: bad'));
    assert.equal(reply.status, 400);
    assert.equal(reply.body.error.message, 'messages[0]: bad');
  });

  test('HttpError is a PolarError (the CLI reports it, not "internal error")', () => {
    assert.equal(HttpError.prototype instanceof Error, true);
    assert.equal(new HttpError(400, 'x').exitCode, 1);
    assert.equal(errorReply(new HttpError(418, 'tea')).status, 418);
  });

  test('matchRoute and pathOf', () => {
    assert.equal(pathOf('/a/b/?x=1'), '/a/b');
    assert.equal(pathOf('/'), '/');
    assert.equal(pathOf(undefined), '/');
    assert.deepEqual(matchRoute(routes, 'PUT', '/items'), { allowed: ['GET', 'POST'] });
    assert.equal(matchRoute(routes, 'GET', '/other'), null);
  });

  test('the server knobs reach node', async () => {
    const s = new HttpServer(async () => {}, {
      requestTimeout: 1234,
      headersTimeout: 999,
      maxConnections: 7,
    });
    assert.equal(s.server.requestTimeout, 1234);
    assert.equal(s.server.headersTimeout, 999);
    assert.equal(s.connections.limits.max, 7);
    // node's own cap sits just above: a new connection reaches a full server, and may take an idle one's place
    assert.equal(s.server.maxConnections, 8);
  });

  test('every server gets a request timeout and a connection cap by default (issue 17, item 8)', () => {
    const s = new HttpServer(async () => {});
    assert.equal(s.server.requestTimeout, DEFAULTS.requestTimeoutMs.value);
    assert.equal(s.connections.limits.max, DEFAULTS.maxConnections.value);
    assert.equal(s.connections.limits.perAddress, DEFAULTS.maxConnectionsPerAddress.value);
    assert.equal(s.connections.limits.idleMs, DEFAULTS.idleConnectionMs.value);
    assert.ok(s.server.headersTimeout <= s.server.requestTimeout);
  });
});

/** a raw connection: what the server wrote, and a promise for its close */
function rawConnection(port: number): { socket: Socket; text: () => string; closed: Promise<void> } {
  const socket = connect(port, '127.0.0.1');
  let text = '';
  socket.on('data', (d) => {
    text += d.toString();
  });
  socket.on('error', () => {});
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  return { socket, text: () => text, closed };
}

describe('http kit: slow bodies and too many connections', () => {
  test('a body that trickles in past the request timeout is cut off with 408', async () => {
    const server = new HttpServer(
      async (req, res) => {
        res.end(JSON.stringify({ got: (await readJson(req, 1024)) as unknown }));
      },
      { requestTimeout: 400 },
    );
    const { port } = await server.listen(0, '127.0.0.1');
    const c = rawConnection(port);
    c.socket.write(
      'POST /x HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"a":',
    );
    // keep sending a byte now and then: still the whole body never arrives
    const drip = setInterval(() => c.socket.write(' '), 50);
    await c.closed;
    clearInterval(drip);
    assert.match(c.text(), /^HTTP\/1\.1 408/);
    await server.close(1000);
  });

  test('connections past the cap that find none idle to replace are dropped; the ones inside it are served', async () => {
    const server = new HttpServer(
      async (_req, res) => {
        res.end('ok');
      },
      { maxConnections: 2 },
    );
    const { port } = await server.listen(0, '127.0.0.1');
    // two keep-alive connections that each carried a request: not idle, never taken
    const a = rawConnection(port);
    const b = rawConnection(port);
    for (const c of [a, b]) {
      c.socket.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
      while (!c.text().includes('ok')) await new Promise((r) => setTimeout(r, 5));
    }
    const third = rawConnection(port);
    await third.closed;
    assert.equal(third.text(), '', 'the third connection got no answer');
    a.socket.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
    while (a.text().split('ok').length < 3) await new Promise((r) => setTimeout(r, 5));
    assert.match(a.text(), /^HTTP\/1\.1 200/);
    a.socket.destroy();
    b.socket.destroy();
    await server.close(1000);
  });
});
