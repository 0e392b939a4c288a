// SPDX-License-Identifier: MIT
// sbxd driven by a client written from docs/PROTOCOL.md alone over npm's @msgpack/msgpack
// codec (the msgpack library most JavaScript agents use): ping, exec with large stdin
// streamed in chunks, argv that is not UTF-8 (a Uint8Array is bin), and the malformed
// messages a hand-written client can send: msgids outside 0..2^32-1, stdin for a request
// that did not ask for it, and a second exec under a msgid still in flight.
// Usage: node msgpack_client.js SOCKET. Prints a JSON report (common.js).
'use strict';

const crypto = require('crypto');
const net = require('net');
const { encode, decodeMultiStream } = require('@msgpack/msgpack');
const { report, guard, step, done, fail, hex, Inbox } = require('./common');

guard(60);
const sock = net.createConnection(process.argv[2]);
const inbox = new Inbox();

function send(msg) {
  sock.write(encode(msg));
}

const isResponse = (id) => (m) => m[0] === 1 && m[1] === id;
const isError = (id, method) => (m) => m[0] === 2 && m[1] === 'error' &&
  m[2][0].msgid === id && m[2][0].method === method;

async function call(id, method, params) {
  send([0, id, method, [params]]);
  const m = await inbox.waitFor(isResponse(id));
  return { err: m[2], res: m[3] };
}

// The notifications of request id (params [id, ...]) of one method, in order.
function notes(id, method) {
  return inbox.msgs.filter((m) => m[0] === 2 && m[1] === method && m[2][0] === id);
}

function output(id, method) {
  return Buffer.concat(notes(id, method).map((m) => m[2][1]));
}

async function pump() {
  for await (const msg of decodeMultiStream(sock)) {
    inbox.push(msg);
  }
}

async function main() {
  pump().catch(fail);

  step('ping');
  report.ping = await call(1, 'ping', {});

  step('stdin');
  // 1 MiB in 64 KiB chunks: more than one socket buffer, so backpressure is in play.
  const data = crypto.randomBytes(1 << 20);
  send([0, 2, 'exec', [{ argv: ['sha256sum'], stdin: true }]]);
  for (let off = 0; off < data.length; off += 65536) {
    send([2, 'exec.stdin', [2, data.subarray(off, off + 65536)]]);
  }
  send([2, 'exec.stdin', [2, new Uint8Array(0)]]);
  let m = await inbox.waitFor(isResponse(2));
  report.stdin = {
    err: m[2], result: m[3], stdout: output(2, 'exec.stdout').toString(),
    want: crypto.createHash('sha256').update(data).digest('hex'),
    started: notes(2, 'exec.started').length,
  };

  step('bin_argv');
  const odd = new Uint8Array([0xff, 0xfe, 0x20, 0x80]);
  const r = await call(3, 'exec', {
    argv: [new TextEncoder().encode('sh'), '-c', 'printf "%s|%s" "$1" "$V"', 'sh', odd],
    env: { V: new Uint8Array([0xc0, 0xaf]) },
  });
  report.bin_argv = { err: r.err, result: r.res, stdout_hex: hex(output(3, 'exec.stdout')) };

  step('nul_argv');
  report.nul_argv = await call(4, 'exec', { argv: ['echo', new Uint8Array([0x61, 0, 0x62])] });

  step('stdin_not_asked');
  send([0, 5, 'exec', [{ argv: ['sh', '-c', 'sleep 1; echo ok'] }]]);
  send([2, 'exec.stdin', [5, new Uint8Array([1, 2, 3])]]);
  const note = await inbox.waitFor(isError(5, 'exec.stdin'));
  m = await inbox.waitFor(isResponse(5));
  report.stdin_not_asked = {
    error: note[2][0], err: m[2], result: m[3], stdout: output(5, 'exec.stdout').toString(),
  };

  step('bad_msgids');
  send([0, 2 ** 32, 'ping', []]);
  send([0, -1, 'exec', [{ argv: ['true'] }]]);
  report.msgid_too_big = (await inbox.waitFor(isError(2 ** 32, 'ping')))[2][0];
  report.msgid_negative = (await inbox.waitFor(isError(-1, 'exec')))[2][0];
  report.ping_after = await call(6, 'ping', {});

  step('duplicate_msgid');
  send([0, 7, 'exec', [{ argv: ['cat'], stdin: true }]]);
  await inbox.waitFor((x) => x[0] === 2 && x[1] === 'exec.started' && x[2][0] === 7);
  const before = inbox.msgs.length;
  send([0, 7, 'exec', [{ argv: ['echo', 'second'] }]]);
  const refusal = await inbox.waitFor(isResponse(7));
  send([2, 'exec.stdin', [7, new TextEncoder().encode('first\n')]]);
  send([2, 'exec.stdin', [7, new Uint8Array(0)]]);
  await inbox.waitFor((x) => isResponse(7)(x) && x !== refusal);
  report.duplicate_msgid = {
    refusal: { err: refusal[2], res: refusal[3] },
    responses: inbox.msgs.filter(isResponse(7)).map((x) => ({ err: x[2], res: x[3] })),
    started: notes(7, 'exec.started').length,
    stdout: output(7, 'exec.stdout').toString(),
    after_refusal: inbox.msgs.slice(before).filter((x) => x[0] === 2).map((x) => x[1]),
  };
  sock.end();
  done();
}

main().catch(fail);
