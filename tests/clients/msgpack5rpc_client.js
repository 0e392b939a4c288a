// SPDX-License-Identifier: MIT
// sbxd driven by npm's msgpack5rpc (the msgpack-rpc session neovim's node client was built
// on), as an agent would use it: ping, exec with stdin streamed, argv that is not UTF-8
// (msgpack5 sends a Buffer as bin), and the malformed cases sbxd must answer rather than
// drop. Usage: node msgpack5rpc_client.js SOCKET. Prints a JSON report (common.js).
'use strict';

const net = require('net');
const Session = require('msgpack5rpc');
const { report, guard, step, done, fail, hex, Inbox } = require('./common');

guard(60);
const sock = net.createConnection(process.argv[2]);
const session = new Session();
const inbox = new Inbox();
session.attach(sock, sock);
session.on('notification', (method, args) => inbox.push({ method, args }));

function call(method, params) {
  return new Promise((resolve) => {
    session.request(method, [params], (err, res) => resolve({ err, res }));
  });
}

// The msgid msgpack5rpc will give its next request: exec.stdin must name it, and the
// session has no public accessor for it.
function nextId() {
  return session._next_request_id;
}

function output(id, method) {
  const chunks = inbox.msgs.filter((m) => m.method === method && m.args[0] === id);
  return Buffer.concat(chunks.map((m) => m.args[1]));
}

function errorNaming(id, method) {
  return (m) => m.method === 'error' && m.args[0] && m.args[0].msgid === id &&
    m.args[0].method === method;
}

async function main() {
  step('ping');
  report.ping = await call('ping', {});

  step('stdin');
  let id = nextId();
  let p = call('exec', { argv: ['sh', '-c', 'cat; echo done >&2'], stdin: true });
  session.notify('exec.stdin', [id, Buffer.from('hello ')]);
  session.notify('exec.stdin', [id, Buffer.from('world\n')]);
  session.notify('exec.stdin', [id, Buffer.alloc(0)]);
  let r = await p;
  report.stdin = {
    result: r.res, err: r.err, stdout: output(id, 'exec.stdout').toString(),
    stderr: output(id, 'exec.stderr').toString(),
    started: inbox.msgs.filter((m) => m.method === 'exec.started' && m.args[0] === id).length,
  };

  step('bin_argv');
  id = nextId();
  const odd = Buffer.from([0xff, 0xfe, 0x20, 0x80]);
  r = await call('exec', {
    argv: [Buffer.from('sh'), '-c', 'printf "%s|%s" "$1" "$V"', 'sh', odd],
    env: { V: Buffer.from([0xc0, 0xaf]) },
  });
  report.bin_argv = { result: r.res, err: r.err, stdout_hex: hex(output(id, 'exec.stdout')) };

  step('nul_argv');
  r = await call('exec', { argv: [Buffer.from('echo'), Buffer.from([0x61, 0, 0x62])] });
  report.nul_argv = { result: r.res, err: r.err };

  step('stdin_not_asked');
  id = nextId();
  p = call('exec', { argv: ['sh', '-c', 'sleep 1; echo ok'] });
  session.notify('exec.stdin', [id, Buffer.from('lost')]);
  const note = await inbox.waitFor(errorNaming(id, 'exec.stdin'));
  r = await p;
  report.stdin_not_asked = {
    id, error: note.args[0], result: r.res, err: r.err,
    stdout: output(id, 'exec.stdout').toString(),
  };

  step('msgid_too_big');
  // A client whose counter has run past 2^32 (msgpack5rpc never wraps it).
  session._next_request_id = 2 ** 32;
  call('ping', {}); // never answered: no response can carry this msgid
  report.msgid_too_big = (await inbox.waitFor(errorNaming(2 ** 32, 'ping'))).args[0];
  session._next_request_id = 1000;
  report.ping_after = await call('ping', {});

  step('bad_args');
  report.bad_args = await call('exec', { argv: 5 });
  step('unknown_method');
  report.unknown_method = await call('rm_rf', {});
  sock.end();
  done();
}

main().catch(fail);
