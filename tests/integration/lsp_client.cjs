// A language client nobody here wrote: Microsoft's vscode-jsonrpc and
// vscode-languageserver-protocol (the protocol layer of VS Code's language client), run by
// node. The test drives it with one JSON command per line on stdin and reads one JSON event
// per line on stdout:
//   {"op": "start", "cmd": [...], "env": {...}}       spawn the server, connect over its stdio
//   {"op": "request", "id": N, "method": M, "params": P}   -> {"id": N, "result": R} or {"id": N, "error": E}
//   {"op": "cancel", "id": N}                          cancel request N ($/cancelRequest)
//   {"op": "notify", "method": M, "params": P}
//   {"op": "exit"}                                     shutdown, exit, wait for the server to end
// Notifications from the server come as {"notification": M, "params": P}.
'use strict';

const { spawn } = require('child_process');
const readline = require('readline');
const rpc = require('vscode-languageserver-protocol/node');

let server = null;
let connection = null;
const tokens = new Map();

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n');
}

function start(cmd, env) {
  server = spawn(cmd[0], cmd.slice(1), { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'inherit'] });
  server.on('exit', (code, signal) => emit({ exited: code, signal }));
  connection = rpc.createProtocolConnection(
    new rpc.StreamMessageReader(server.stdout), new rpc.StreamMessageWriter(server.stdin));
  for (const method of ['window/showMessage', 'window/logMessage']) {
    connection.onNotification(method, (params) => emit({ notification: method, params }));
  }
  connection.listen();
}

function request(id, method, params) {
  const source = new rpc.CancellationTokenSource();
  tokens.set(id, source);
  connection.sendRequest(method, params, source.token).then(
    (result) => emit({ id, result: result === undefined ? null : result }),
    (error) => emit({ id, error: { code: error.code, message: error.message } }),
  ).finally(() => tokens.delete(id));
}

async function exit() {
  await connection.sendRequest('shutdown');
  await connection.sendNotification('exit');
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const cmd = JSON.parse(line);
  switch (cmd.op) {
    case 'start': start(cmd.cmd, cmd.env || {}); break;
    case 'request': request(cmd.id, cmd.method, cmd.params); break;
    case 'cancel': { const t = tokens.get(cmd.id); if (t) t.cancel(); break; }
    case 'notify': connection.sendNotification(cmd.method, cmd.params); break;
    case 'exit': exit().catch((e) => emit({ id: 'exit', error: { message: String(e) } })); break;
    default: emit({ error: { message: 'unknown op ' + cmd.op } });
  }
});
