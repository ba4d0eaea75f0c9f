/** The strace reader the harness tests use to prove a harness reaches nothing but polar (capture-run.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { outsideConnects } from '../../support/capture-run.ts';

// lines as strace 6.1 wrote them for OpenCode 1.18.33 before its config dir was marked (it looked up
// registry.npmjs.org and opened a TLS connection), and for its calls to polar's proxy
const LOG = `23654 connect(23, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT (No such file or directory)
23654 connect(23, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = 0
23941 connect(23, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("203.0.113.80")}, 16) = -1 EINPROGRESS (Operation now in progress)
23340 connect(21, {sa_family=AF_INET, sin_port=htons(40873), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 EINPROGRESS (Operation now in progress)
1200 connect(5, {sa_family=AF_INET6, sin6_port=htons(8080), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0
1200 connect(5, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "2001:db8::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 ENETUNREACH (Network is unreachable)
`;

test('a DNS lookup and a TLS connection leave the machine; loopback and unix sockets do not', () => {
  assert.deepEqual(outsideConnects(LOG), ['10.255.255.53:53', '203.0.113.80:443', '2001:db8::1:443']);
});

test('a log of loopback calls only is clean', () => {
  assert.deepEqual(outsideConnects(LOG.split('\n').slice(3, 5).join('\n')), []);
});
