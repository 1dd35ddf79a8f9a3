// The extension's glue with `vscode` and `vscode-languageclient/node` replaced by fakes.
const test = require("node:test");
const assert = require("node:assert/strict");
const Module = require("node:module");

function fakes(config = {}) {
  const calls = { commands: {}, requests: [], notifications: [], quickPicks: [], edits: [], clients: [], messages: [] };
  let onCancel = null;
  // A document whose text the editor's edits really change (each edit a new version), as VS Code's does.
  const document = {
    uri: { toString: () => "file:///w/a.py" },
    text: "def a():\n    x = 1\n    y = 2\n    z = 3\n    return x + y + z\n",
    version: 1,
    getText() { return this.text; },
    offset(p) {
      const lines = this.text.split("\n");
      if (p.line >= lines.length) return this.text.length;
      return lines.slice(0, p.line).reduce((n, l) => n + l.length + 1, 0) + Math.min(p.character, lines[p.line].length);
    },
    offsetAt(p) { return this.offset(p); },
    positionAt(offset) {
      const before = this.text.slice(0, offset).split("\n");
      return { line: before.length - 1, character: before.at(-1).length };
    },
  };
  const editor = {
    document,
    selection: { active: { line: 4, character: 2 } },
    edit: async (build, options) => {
      const delay = calls.editDelay;
      // A key that reaches VS Code first: the document moves on and VS Code refuses the edit (made for the old text).
      // (calls.keyTimes of them in a row, each lands as the next edit travels: a user typing on.)
      if (calls.keyFirst) {
        calls.keyFirst();
        calls.keyTimes = (calls.keyTimes ?? 1) - 1;
        if (calls.keyTimes <= 0) calls.keyFirst = null;
        calls.refused = (calls.refused ?? 0) + 1;
        return false;
      }
      if (calls.editLost) return new Promise(() => {}); // VS Code neither applies it nor answers
      const ops = [];
      build({ replace: (range, text) => ops.push({ range, text }) });
      calls.edits.push({ ops, options });
      for (const { range, text } of [...ops].reverse()) {
        document.text = document.text.slice(0, document.offset(range.start)) + text + document.text.slice(document.offset(range.end));
      }
      document.version += 1;
      if (calls.editNever) return new Promise(() => {}); // VS Code never says it applied it
      // VS Code's document has the change (and its version) a moment before the edit's promise settles.
      if (delay) await new Promise((r) => setTimeout(r, delay));
      return true;
    },
  };
  const vscode = {
    workspace: {
      getConfiguration: () => ({ get: (key, dflt) => (key in config ? config[key] : dflt) }),
      onDidChangeConfiguration: (f) => { calls.configurationChanged = f; return { dispose() {} }; },
      textDocuments: [document],
      // A protocol edit (passed through the fake converter) or a WorkspaceEdit, applied to the document.
      applyEdit: async (edit) => {
        const ops = edit.ops ?? edit.documentChanges?.[0]?.edits?.map((e) => ({ range: e.range, text: e.newText })) ?? [];
        calls.workspaceEdits = (calls.workspaceEdits ?? 0) + 1;
        for (const { range, text } of [...ops].reverse()) {
          document.text = document.text.slice(0, document.offset(range.start)) + text + document.text.slice(document.offset(range.end));
        }
        if (ops.length) document.version += 1;
        return true;
      },
    },
    window: {
      activeTextEditor: editor,
      visibleTextEditors: [editor],
      createQuickPick: () => {
        const pick = { items: [], value: "", selectedItems: [], handlers: {},
          onDidChangeValue(f) { this.handlers.change = f; }, onDidAccept(f) { this.handlers.accept = f; },
          onDidHide(f) { this.handlers.hide = f; }, dispose() {},
          show() { calls.quickPicks.push(this); this.value = "Add type hints"; this.handlers.change(this.value);
            this.selectedItems = [this.items[0]]; this.handlers.accept(); } };
        return pick;
      },
      withProgress: async (options, task) => {
        calls.progressOptions = options;
        const cancellation = { onCancellationRequested: (f) => { onCancel = f; return { dispose() {} }; } };
        return task({ report: (r) => (calls.lastReport = r) }, cancellation);
      },
      showErrorMessage: (m) => calls.messages.push(m),
      showWarningMessage: (m) => calls.messages.push(m),
      createWebviewPanel: () => ({ webview: {} }),
    },
    commands: { registerCommand: (name, f) => { calls.commands[name] = f; return { dispose() {} }; } },
    ProgressLocation: { Notification: 15 },
    ViewColumn: { Beside: -2 },
    WorkspaceEdit: class { constructor() { this.ops = []; } replace(uri, range, text) { this.ops.push({ range, text }); } },
    Position: class { constructor(line, character) { this.line = line; this.character = character; } },
    Range: class {
      constructor(a, b, c, d) {
        [this.start, this.end] = typeof a === "number" ? [{ line: a, character: b }, { line: c, character: d }] : [a, b];
      }
    },
  };
  class LanguageClient {
    constructor(id, name, serverOptions, clientOptions) {
      Object.assign(this, { id, name, serverOptions, clientOptions });
      calls.clients.push(this);
      this.handlers = {};
      this.protocol2CodeConverter = { asWorkspaceEdit: async (edit) => edit };
      this.outputChannel = { appendLine: (line) => (calls.log = [...(calls.log ?? []), line]) };
    }
    async start() { this.started = true; }
    async stop() { this.stopped = true; }
    isRunning() { return this.started === true && this.stopped !== true; }
    createDefaultErrorHandler(max) { return { closed: () => ({ action: "restart", max }) }; }
    onRequest(type, f) { this.handlers[type.method] = f; }
    onProgress(type, token, f) { calls.progressListener = f; return { dispose() {} }; }
    sendNotification(type, params) { calls.notifications.push({ method: type.method, params }); }
    async sendRequest(type, params) {
      calls.requests.push({ method: type.method, params });
      if (type.method === "textDocument/codeAction") return [];
      calls.progressListener({ kind: "report", message: "12 tokens · 150 tok/s · acceptance 80%" });
      if (onCancel) onCancel(); // the user presses Cancel on the notification
      // An honest server: "cancelled" only if the extension told it so, with this rewrite's token.
      const token = params.arguments && params.arguments[0].workDoneToken;
      const told = calls.notifications.some((n) => n.method === "window/workDoneProgress/cancel" && n.params.token === token);
      return told ? { applied: false, reason: "cancelled" } : { applied: true, changed: true };
    }
  }
  const languageClient = {
    LanguageClient,
    ExecuteCommandRequest: { type: { method: "workspace/executeCommand" } },
    CodeActionRequest: { type: { method: "textDocument/codeAction" } },
    DidChangeConfigurationNotification: { type: { method: "workspace/didChangeConfiguration" } },
    ErrorAction: { Continue: 1, Shutdown: 2 },
    ApplyWorkspaceEditRequest: { type: { method: "workspace/applyEdit" } },
    WorkDoneProgress: { type: { method: "$/progress" } },
    WorkDoneProgressCancelNotification: { type: { method: "window/workDoneProgress/cancel" } },
  };
  return { vscode, languageClient, calls, editor, config };
}

function load(f) {
  const original = Module._load;
  Module._load = function (request, ...rest) {
    if (request === "vscode") return f.vscode;
    if (request === "vscode-languageclient/node") return f.languageClient;
    return original.call(this, request, ...rest);
  };
  try {
    delete require.cache[require.resolve("../out/extension.js")];
    return require("../out/extension.js");
  } finally {
    Module._load = original;
  }
}

const context = () => {
  const state = {};
  return { subscriptions: [], globalState: { get: (k, d) => state[k] ?? d, update: async (k, v) => { state[k] = v; } } };
};

test("activation starts editspec-lsp with the settings as initializationOptions", async () => {
  const f = fakes({ python: "/venv/bin/python", maxTokens: 300, model: "/m.gguf" });
  const ext = load(f);
  await ext.activate(context());
  const client = f.calls.clients[0];
  assert.deepEqual(client.serverOptions, { command: "/venv/bin/python", args: ["-m", "lsp"] });
  assert.equal(client.clientOptions.initializationOptions.maxTokens, 300);
  assert.equal(client.clientOptions.initializationOptions.model, "/m.gguf");
  assert.ok(client.handlers["workspace/applyEdit"], "applyEdit is handled by the extension");
  for (const name of ["editspec.rewriteFunction", "editspec.cancelRewrite", "editspec.showSpeculation"]) {
    assert.ok(f.calls.commands[name], name);
  }
});

test("the command asks for an instruction, sends editspec.rewrite, and Cancel really cancels", async () => {
  const f = fakes();
  const ext = load(f);
  await ext.activate(context());
  const result = await f.calls.commands["editspec.rewriteFunction"]();
  assert.equal(f.calls.quickPicks.length, 1);
  assert.equal(f.calls.progressOptions.cancellable, true);
  const [ahead, request] = f.calls.requests;
  // Code actions first (the server reads the prompt ahead meanwhile), then the rewrite.
  assert.equal(ahead.method, "textDocument/codeAction");
  assert.deepEqual(ahead.params.range.start, { line: 4, character: 2 });
  assert.equal(request.params.command, "editspec.rewrite");
  const args = request.params.arguments[0];
  assert.deepEqual(args.position, { line: 4, character: 2 });
  assert.equal(args.uri, "file:///w/a.py");
  assert.equal(args.instruction, "Add type hints");
  assert.match(args.workDoneToken, /^editspec-/);
  assert.deepEqual(f.calls.notifications, [{ method: "window/workDoneProgress/cancel", params: { token: args.workDoneToken } }]);
  assert.equal(f.calls.lastReport.message, "12 tokens · 150 tok/s · acceptance 80%");
  assert.equal(result.reason, "cancelled");
});

test("a code action's preset goes through the same flow without asking", async () => {
  const f = fakes();
  const ext = load(f);
  await ext.activate(context());
  const middleware = f.calls.clients[0].clientOptions.middleware;
  await middleware.executeCommand("editspec.rewrite",
    [{ uri: "file:///w/a.py", position: { line: 1, character: 0 }, instruction: "Add a docstring" }], () => assert.fail());
  assert.equal(f.calls.quickPicks.length, 0);
  assert.equal(f.calls.requests[0].params.arguments[0].instruction, "Add a docstring");
});

test("streamed edits of a rewrite are one undo step", async () => {
  const f = fakes();
  const ext = load(f);
  await ext.activate(context());
  const client = f.calls.clients[0];
  client.sendRequest = async (type, params) => {
    if (type.method === "textDocument/codeAction") return [];
    const edit = (line) => ({ edit: { documentChanges: [{ textDocument: { uri: "file:///w/a.py", version: f.editor.document.version },
      edits: [{ range: { start: { line, character: 0 }, end: { line, character: 1 } }, newText: "x" }] }] } });
    for (const line of [1, 2, 3]) assert.deepEqual(await client.handlers["workspace/applyEdit"](edit(line)), { applied: true });
    return { applied: true };
  };
  await f.calls.commands["editspec.rewriteFunction"]();
  assert.deepEqual(f.calls.edits.map((e) => e.options), [
    { undoStopBefore: true, undoStopAfter: false },
    { undoStopBefore: false, undoStopAfter: false },
    { undoStopBefore: false, undoStopAfter: false },
  ]);
});

test("a changed setting goes to the running server; only how the server starts restarts it", async () => {
  const f = fakes({ maxTokens: 300, prefixCacheMb: 64 });
  const ext = load(f);
  await ext.activate(context());
  await f.calls.configurationChanged({ affectsConfiguration: (section) => section === "editor" });
  assert.equal(f.calls.clients.length, 1);
  assert.equal(f.calls.notifications.length, 0);
  f.config.maxTokens = 500;
  f.config.prefixCacheMb = null; // cleared: the server's default again, not the old value
  await f.calls.configurationChanged({ affectsConfiguration: (section) => section.startsWith("editspec") && section !== "editspec.python" && section !== "editspec.serverCommand" });
  assert.equal(f.calls.clients.length, 1);
  const sent = f.calls.notifications.filter((n) => n.method === "workspace/didChangeConfiguration");
  assert.equal(sent.length, 1);
  assert.equal(sent[0].params.settings.editspec.maxTokens, 500);
  assert.equal(sent[0].params.settings.editspec.prefixCacheMb, null);
  assert.equal(sent[0].params.settings.editspec.model, "coder");
  f.config.python = "/venv/bin/python";
  await f.calls.configurationChanged({ affectsConfiguration: (section) => section === "editspec" || section === "editspec.python" });
  assert.equal(f.calls.clients.length, 2);
  assert.equal(f.calls.clients[0].stopped, true);
  assert.equal(f.calls.clients[1].started, true);
  assert.deepEqual(f.calls.clients[1].serverOptions, { command: "/venv/bin/python", args: ["-m", "lsp"] });
  assert.equal(f.calls.clients[1].clientOptions.initializationOptions.maxTokens, 500);
});

/** A rewrite whose server streams edits (`stream`, given `edit(line)`: the rewrite's edit of that line) and then
 * dies. A second rewrite's request is left waiting, as a queued one would be; `f.calls.rewrites` counts them. */
function rewriteThatDies(f, stream) {
  const client = f.calls.clients[0];
  f.calls.rewrites = 0;
  client.sendRequest = async (type) => {
    if (type.method === "textDocument/codeAction") return [];
    f.calls.rewrites += 1;
    if (f.calls.rewrites > 1) return new Promise(() => {});
    await stream((line) => client.handlers["workspace/applyEdit"]({ edit: { documentChanges: [{
      textDocument: { uri: "file:///w/a.py", version: f.editor.document.version },
      edits: [{ range: { start: { line, character: 4 }, end: { line, character: 5 } }, newText: "w" }] }] } }));
    throw new Error("Pending response rejected since connection got disposed");
  };
  return f.calls.commands["editspec.rewriteFunction"]();
}

/** The user types into the document (as VS Code does: the text changes, and its version). */
function type(f, at, text) {
  const d = f.editor.document;
  d.text = d.text.slice(0, at) + text + d.text.slice(at);
  d.version += 1;
}

test("a server that died is started again, and keys typed meanwhile (writes to its closed pipe) show no errors", async () => {
  const f = fakes();
  await load(f).activate(context());
  const { errorHandler, middleware } = f.calls.clients[0].clientOptions;
  // vscode-languageclient's own handler shut the client down at the fourth failed write, with an error toast each
  for (const count of [1, 4, 9]) {
    assert.deepEqual(await errorHandler.error(new Error("write EPIPE"), undefined, count), { action: 1, handled: true });
  }
  assert.deepEqual(await errorHandler.closed(), { action: "restart", max: 2 }); // its restart rule stays
  let sent = 0;
  const event = { document: { uri: { toString: () => "file:///w/a.py" } } };
  await middleware.didChange(event, async () => { sent++; });
  await middleware.didChange(event, async () => { throw new Error("write EPIPE"); }); // no rejection: no toast
  assert.equal(sent, 1);
  assert.ok(f.calls.log.some((line) => /a change of file:\/\/\/w\/a.py not sent: write EPIPE/.test(line)), f.calls.log);
  assert.ok(f.calls.log.some((line) => /the connection to the server failed: write EPIPE/.test(line)));
  assert.equal(f.calls.messages.length, 0);
});

test("a server that stops half-way through a rewrite: the document is put back, in the rewrite's undo step", async () => {
  const f = fakes();
  await load(f).activate(context());
  const original = f.editor.document.text;
  assert.equal(await rewriteThatDies(f, async (edit) => {
    for (const line of [1, 2]) await edit(line);
  }), undefined);
  assert.equal(f.editor.document.text, original);
  assert.equal(f.calls.messages.length, 1);
  assert.match(f.calls.messages[0], /server stopped during the rewrite; the function is back as it was/);
  assert.deepEqual(f.calls.edits.at(-1).options, { undoStopBefore: false, undoStopAfter: true }); // the same undo step
});

test("a server that stops half-way: what the user typed elsewhere meanwhile stays, between the edits and after them", async () => {
  const f = fakes();
  await load(f).activate(context());
  const original = f.editor.document.text;
  await rewriteThatDies(f, async (edit) => {
    await edit(1);
    type(f, 0, "import os\n"); // above the function, between two of the rewrite's edits
    await edit(3); // (line 3 is the old line 2: the server saw the typing)
    type(f, f.editor.document.text.length, "print(a())\n"); // below it, after the last edit
  });
  assert.equal(f.editor.document.text, "import os\n" + original + "print(a())\n");
  assert.match(f.calls.messages[0], /the function is back as it was/);
  assert.match(f.calls.log.join("\n"), /rewrite of file:\/\/\/w\/a.py failed after 2 edits: .*\n.*put-back: replacing lines 3-4 \(attempt 1\)\n.*the function is back as it was/);
});

test("a server that stops half-way: a key typed while VS Code was still applying an edit is the user's, and stays", async () => {
  const f = fakes();
  await load(f).activate(context());
  const original = f.editor.document.text;
  await rewriteThatDies(f, async (edit) => {
    f.calls.editDelay = 30;
    const applying = edit(1); // in the document; its promise settles after the keystrokes below
    type(f, f.editor.document.text.length, "#");
    await applying;
    f.calls.editDelay = 0;
    type(f, f.editor.document.text.length, " more");
  });
  assert.equal(f.editor.document.text, original + "# more");
  assert.match(f.calls.messages[0], /the function is back as it was/);
});

test("a server that stops half-way: a put-back refused because the user typed meanwhile is worked out again", async () => {
  const f = fakes();
  await load(f).activate(context());
  const original = f.editor.document.text;
  await rewriteThatDies(f, async (edit) => {
    for (const line of [1, 2]) await edit(line);
    f.calls.keyFirst = () => type(f, f.editor.document.text.length, "# later\n"); // lands as the put-back travels
  });
  assert.equal(f.calls.refused, 1);
  assert.equal(f.editor.document.text, original + "# later\n");
  assert.match(f.calls.messages[0], /the function is back as it was/);
  assert.match(f.calls.log.join("\n"), /put-back: VS Code refused the edit \(attempt 1\); trying again in 50 ms/);
});

/** The user types on at the end of the document: `times` keys, each landing as the next edit travels to VS Code. */
function keysFirst(f, times) {
  f.calls.keyTimes = times;
  f.calls.keyFirst = () => type(f, f.editor.document.text.length, "#");
}

test("a server that stops half-way while the user types on: the put-back is tried again until a key no longer lands first", async () => {
  const f = fakes();
  await load(f).activate(context());
  const original = f.editor.document.text;
  await rewriteThatDies(f, async (edit) => {
    for (const line of [1, 2]) await edit(line);
    keysFirst(f, 5); // a burst of keys (CI's real VS Code saw 3 attempts in 110 ms all refused)
  });
  assert.equal(f.calls.refused, 5);
  assert.equal(f.editor.document.text, original + "#####");
  assert.match(f.calls.messages[0], /the function is back as it was/);
  assert.match(f.calls.log.join("\n"), /attempt 5\); trying again in 800 ms\n.*put-back: replacing lines 2-3 \(attempt 6\)/);
});

test("a server that stops half-way while the text keeps changing past the put-back's wait: Undo is named, nothing half put back", async () => {
  const f = fakes();
  const extension = load(f);
  await extension.activate(context());
  extension.PUT_BACK_WAIT_MS.value = 200;
  await rewriteThatDies(f, async (edit) => {
    for (const line of [1, 2]) await edit(line);
    keysFirst(f, 100);
  });
  assert.equal(f.calls.refused, 3); // after 50, 100 ms: the next pause, 200 ms, would pass the wait
  assert.match(f.editor.document.text, /^\s+w = 1\n\s+w = 2\n[^]*###$/m); // the rewrite's edits and the keys
  assert.match(f.calls.messages[0], /server stopped during the rewrite; the rewrite stopped half-way through the function: Undo takes it back/);
  assert.match(f.calls.log.join("\n"), /attempt 3\); the text kept changing for 200 ms, no more attempts/);
});

test("a server that stops half-way: rewrite edits refused because a key landed first leave the put-back whole", async () => {
  const f = fakes();
  await load(f).activate(context());
  const original = f.editor.document.text;
  await rewriteThatDies(f, async (edit) => {
    f.calls.keyFirst = () => type(f, f.editor.document.text.length, "#"); // lands as the first edit travels
    assert.deepEqual(await edit(1), { applied: false });
    assert.deepEqual(await edit(2), { applied: true });
    assert.deepEqual(f.calls.edits.at(-1).options, { undoStopBefore: true, undoStopAfter: false }); // opens the step
    f.calls.keyFirst = () => type(f, f.editor.document.text.length, " more");
    assert.deepEqual(await edit(1), { applied: false });
  });
  assert.equal(f.calls.refused, 2);
  assert.equal(f.editor.document.text, original + "# more");
  assert.match(f.calls.messages[0], /the function is back as it was/);
  assert.match(f.calls.log.join("\n"), /failed after 1 edits/);
});

test("a server that stops half-way after the user typed inside the rewritten lines: Undo is named, nothing is put back", async () => {
  const f = fakes();
  await load(f).activate(context());
  await rewriteThatDies(f, async (edit) => {
    await edit(1);
    type(f, f.editor.document.text.indexOf("w = 1") + 1, "x"); // "wx = 1"
  });
  assert.match(f.editor.document.text, /wx = 1/);
  assert.match(f.calls.messages[0], /server stopped during the rewrite; .*Undo takes it back/);
});

test("an edit made for an older version of the document, or for one closed meanwhile, is refused", async () => {
  const f = fakes();
  await load(f).activate(context());
  const original = f.editor.document.text;
  await rewriteThatDies(f, async (edit) => {
    await edit(1);
    const stale = { edit: { documentChanges: [{ textDocument: { uri: "file:///w/a.py", version: f.editor.document.version - 1 },
      edits: [{ range: { start: { line: 2, character: 4 }, end: { line: 2, character: 5 } }, newText: "w" }] }] } };
    assert.deepEqual(await f.calls.clients[0].handlers["workspace/applyEdit"](stale), { applied: false });
    f.vscode.workspace.textDocuments = []; // the user closed the file
    f.vscode.window.visibleTextEditors = [];
    const workspaceEdits = f.calls.workspaceEdits ?? 0;
    assert.deepEqual(await edit(2), { applied: false });
    assert.equal(f.calls.workspaceEdits ?? 0, workspaceEdits, "the closed file was not opened again to apply it");
  });
  assert.equal(f.editor.document.text, original.replace("x = 1", "w = 1")); // the fake keeps the closed text
  assert.match(f.calls.messages[0], /Undo takes it back/);
});

test("a server that stops while its last edit is still settling: that edit counts as the rewrite's, and all is put back", async () => {
  const f = fakes();
  await load(f).activate(context());
  const original = f.editor.document.text;
  await rewriteThatDies(f, async (edit) => {
    await edit(1);
    f.calls.editDelay = 50;
    edit(2); // in the document, not answered yet, when the connection goes
    f.calls.editDelay = 0;
  });
  await new Promise((r) => setTimeout(r, 100)); // anything still to land has landed
  assert.equal(f.editor.document.text, original);
  assert.match(f.calls.messages[0], /the function is back as it was/);
});

/** The extension, its put-back waiting 50 ms (not 5 s) for VS Code's answer to the last edit. */
async function activateWaitingBriefly(f) {
  const extension = load(f);
  await extension.activate(context());
  extension.LAST_EDIT_WAIT_MS.value = 50;
}

test("a server that stops while VS Code never answers its last edit: the text says it went in, and all is put back", { timeout: 5000 }, async () => {
  const f = fakes();
  await activateWaitingBriefly(f);
  const original = f.editor.document.text;
  await rewriteThatDies(f, async (edit) => {
    await edit(1);
    f.calls.editNever = true;
    edit(2); // in the document; VS Code never says so
    f.calls.editNever = false;
  });
  assert.equal(f.editor.document.text, original);
  assert.match(f.calls.messages[0], /the function is back as it was/);
  assert.match(f.calls.log.join("\n"), /did not say within 50 ms whether the last edit went in; it is in the text/);
});

test("a server that stops half-way, and VS Code never answers the put-back's edit: the text says it went in", { timeout: 5000 }, async () => {
  const f = fakes();
  await activateWaitingBriefly(f);
  const original = f.editor.document.text;
  await rewriteThatDies(f, async (edit) => {
    for (const line of [1, 2]) await edit(line);
    f.calls.editNever = true; // from here on: VS Code applies an edit, and never says so
  });
  assert.equal(f.editor.document.text, original);
  assert.match(f.calls.messages[0], /the function is back as it was/);
  assert.match(f.calls.log.join("\n"), /did not say within 50 ms whether the put-back went in; it is in the text/);
});

test("a server that stops half-way, and VS Code neither applies nor answers the put-back's edit: no second try, the message says so", { timeout: 5000 }, async () => {
  const f = fakes();
  await activateWaitingBriefly(f);
  await rewriteThatDies(f, async (edit) => {
    for (const line of [1, 2]) await edit(line);
    f.calls.editLost = true;
  });
  assert.match(f.editor.document.text, /^\s+w = 1\n\s+w = 2\n/m); // left as it is
  assert.equal(f.calls.log.filter((l) => /put-back: replacing/.test(l)).length, 1); // a later one could undo it
  assert.match(f.calls.messages[0], /whether putting it back worked cannot be told \(VS Code did not say\): check the function, Undo takes it back/);
});

test("a server that stops while VS Code never answers its first edit, which is not in the text: nothing to put back, no Undo named", { timeout: 5000 }, async () => {
  const f = fakes();
  await activateWaitingBriefly(f);
  const original = f.editor.document.text;
  await rewriteThatDies(f, async (edit) => {
    f.calls.editLost = true;
    edit(1);
    f.calls.editLost = false;
  });
  assert.equal(f.editor.document.text, original);
  assert.doesNotMatch(f.calls.messages[0], /Undo/); // Undo would take back the user's own last change
  assert.match(f.calls.log.join("\n"), /whether the last edit went in; it is not in the text/);
});

test("a server that stops while VS Code never answers its first edit and the user typed meanwhile: nothing put back, and the message says it cannot tell", { timeout: 5000 }, async () => {
  const f = fakes();
  await activateWaitingBriefly(f);
  await rewriteThatDies(f, async (edit) => {
    f.calls.editNever = true;
    edit(1);
    f.calls.editNever = false;
    type(f, f.editor.document.text.length, "# typed");
  });
  assert.match(f.editor.document.text, /^\s+w = 1\n[^]*# typed$/m); // left as it is
  assert.match(f.calls.messages[0], /whether the rewrite's first edit went in cannot be told/);
  assert.match(f.calls.log.join("\n"), /and the text changed otherwise too; nothing put back/);
});

test("a second rewrite asked in a document whose rewrite runs is refused, and cannot take the first one's edits", async () => {
  const f = fakes();
  await load(f).activate(context());
  const original = f.editor.document.text;
  await rewriteThatDies(f, async (edit) => {
    await edit(1);
    f.calls.commands["editspec.rewriteFunction"](); // the user asks again, in the same document
    await new Promise((r) => setTimeout(r, 10));
    await edit(2);
  });
  assert.equal(f.calls.rewrites, 1); // (the old extension sent the second)
  assert.match(f.calls.messages[0], /a rewrite is already running in this document/);
  assert.deepEqual(f.calls.edits.slice(0, 2).map((e) => e.options), [
    { undoStopBefore: true, undoStopAfter: false },
    { undoStopBefore: false, undoStopAfter: false },
  ]); // still one undo step
  assert.equal(f.editor.document.text, original);
  assert.match(f.calls.messages[1], /the function is back as it was/);
});

test("a server that stops while the rewrite's file is not shown: the edits made meanwhile count too, all is put back", async () => {
  const f = fakes();
  await load(f).activate(context());
  const original = f.editor.document.text;
  await rewriteThatDies(f, async (edit) => {
    await edit(1);
    f.vscode.window.visibleTextEditors = []; // the user switched to another file's tab
    assert.deepEqual(await edit(2), { applied: true });
    assert.match(f.editor.document.text, /w = 2/);
  });
  assert.equal(f.editor.document.text, original);
  assert.match(f.calls.messages[0], /the function is back as it was/);
});
