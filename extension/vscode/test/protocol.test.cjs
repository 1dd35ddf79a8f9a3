// The real Python server driven through vscode-jsonrpc, the way VS Code's client talks to it.
const test = require("node:test");
const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const rpc = require("vscode-jsonrpc/node");

const PYTHON = process.env.EDITSPEC_TEST_PYTHON || "python3";
// `python -m lsp` by default; the Python suite runs it with the scripted model (tests.scripted_lsp), whose answer is
// known to the character, so that the document can be compared with an in-process rewrite with no near-tie.
const SERVER_MODULE = process.env.EDITSPEC_SERVER_MODULE || "lsp";
const CODE = ["def describe(values):", "    count = len(values)", "    biggest = max(values)", "    smallest = min(values)",
  "    text = 'count ' + str(count)", "    text = text + ' max ' + str(biggest)", "    text = text + ' min ' + str(smallest)",
  "    return text", ""].join("\n");
const URI = "file:///w/example.py";
// Changes several lines in turn with the default model, so the rewrite streams several edits.
const INSTRUCTION = process.env.EDITSPEC_INSTRUCTION || "Rename the variable text to result.";

function offset(text, pos) {
  const lines = text.split("\n");
  let o = 0;
  for (let i = 0; i < pos.line; i++) o += lines[i].length + 1;
  return o + pos.character;
}

test("rewrite streams workspace edits and progress, and the server lives on", { timeout: 120000 }, async () => {
  const server = spawn(PYTHON, ["-m", SERVER_MODULE], { cwd: process.env.EDITSPEC_ROOT || "../..", stdio: ["pipe", "pipe", "inherit"] });
  const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(server.stdout), new rpc.StreamMessageWriter(server.stdin));
  let text = CODE;
  let version = 1;
  const edits = [];
  const progress = [];
  conn.onRequest("workspace/applyEdit", (params) => {
    const change = params.edit.documentChanges[0];
    for (const e of [...change.edits].sort((a, b) => offset(text, b.range.start) - offset(text, a.range.start))) {
      text = text.slice(0, offset(text, e.range.start)) + e.newText + text.slice(offset(text, e.range.end));
    }
    edits.push(params);
    version += 1;
    conn.sendNotification("textDocument/didChange", { textDocument: { uri: URI, version }, contentChanges: [{ text }] });
    return { applied: true };
  });
  conn.onRequest("window/workDoneProgress/create", () => null);
  conn.onNotification("$/progress", (p) => progress.push(p.value.kind));
  conn.onNotification("window/showMessage", () => {});
  conn.listen();
  try {
    await conn.sendRequest("initialize", {
      processId: process.pid, rootUri: null,
      capabilities: { workspace: { applyEdit: true, workspaceEdit: { documentChanges: true } }, window: { workDoneProgress: true } },
      initializationOptions: { maxTokens: 600, editIntervalMs: 0 },
    });
    conn.sendNotification("initialized", {});
    conn.sendNotification("textDocument/didOpen", { textDocument: { uri: URI, languageId: "python", version, text } });
    const actions = await conn.sendRequest("textDocument/codeAction", {
      textDocument: { uri: URI }, range: { start: { line: 1, character: 4 }, end: { line: 1, character: 4 } },
      context: { diagnostics: [], only: ["refactor.rewrite"] } });
    assert.ok(actions.length >= 2 && actions[0].command.command === "editspec.rewrite", JSON.stringify(actions));
    const result = await conn.sendRequest("workspace/executeCommand", { command: "editspec.rewrite", arguments: [
      { uri: URI, position: { line: 1, character: 4 }, instruction: INSTRUCTION, workDoneToken: "vsc-1" }] });
    assert.equal(result.applied, true, JSON.stringify(result));
    assert.ok(edits.length >= 2, `streamed ${edits.length} edits`);
    assert.deepEqual([progress[0], progress[progress.length - 1]], ["begin", "end"]);
    assert.ok(progress.includes("report"), `progress: ${JSON.stringify(progress)}`);
    if (process.env.EDITSPEC_EXPECTED) assert.equal(text, fs.readFileSync(process.env.EDITSPEC_EXPECTED, "utf8"));
    else assert.notEqual(text, CODE);
    await assert.rejects(conn.sendRequest("workspace/executeCommand", { command: "editspec.rewrite", arguments: [{ uri: URI }] }),
      /position/);
    const again = await conn.sendRequest("textDocument/codeAction", {
      textDocument: { uri: URI }, range: { start: { line: 1, character: 4 }, end: { line: 1, character: 4 } }, context: { diagnostics: [] } });
    assert.ok(again.length >= 1, `no code action after the rewrite, in:\n${text}`);
    await conn.sendRequest("shutdown");
    // The exit notification is written asynchronously: wait for it and for the server to go, or the stream is
    // destroyed under the pending write (an unhandled rejection that fails the file after the test passed).
    const exited = new Promise((resolve) => {
      if (server.exitCode !== null) resolve();
      else { server.once("exit", resolve); setTimeout(resolve, 10000).unref(); }
    });
    await conn.sendNotification("exit");
    await exited;
  } finally {
    conn.dispose();
    server.kill();
  }
});
