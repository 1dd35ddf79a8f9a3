const test = require("node:test");
const assert = require("node:assert/strict");
const logic = require("../out/logic.js");

const base = { serverCommand: [], python: "", model: "", draftModel: "", threads: null, gpuLayers: null,
  temperature: 0, maxTokens: null, streaming: "edits", presets: ["Add type hints"], readAhead: true, preload: true,
  secondLook: true, contextTokens: null, editIntervalMs: null, prefixCacheMb: null };

test("server command: explicit, then python -m lsp, then editspec-lsp on PATH", () => {
  assert.deepEqual(logic.serverCommand(base), { command: "editspec-lsp", args: [] });
  assert.deepEqual(logic.serverCommand({ ...base, python: "/venv/bin/python" }),
    { command: "/venv/bin/python", args: ["-m", "lsp"] });
  assert.deepEqual(logic.serverCommand({ ...base, python: "/p", serverCommand: ["/x/editspec-lsp", "--log-level", "INFO"] }),
    { command: "/x/editspec-lsp", args: ["--log-level", "INFO"] });
});

test("initialization options leave empty settings to the server", () => {
  assert.deepEqual(logic.initializationOptions(base),
    { temperature: 0, streaming: "edits", presets: ["Add type hints"], readAhead: true, secondLook: true,
      preload: true });
  assert.equal(logic.initializationOptions({ ...base, maxTokens: 300 }).maxTokens, 300);
  const o = logic.initializationOptions({ ...base, model: "/m.gguf", draftModel: "/d.gguf", threads: 2 });
  assert.equal(o.model, "/m.gguf");
  assert.equal(o.draftModel, "/d.gguf");
  assert.equal(o.threads, 2);
  const more = logic.initializationOptions({ ...base, gpuLayers: -1, readAhead: false, preload: false,
    secondLook: false, contextTokens: 0, editIntervalMs: 0, prefixCacheMb: 64 });
  assert.equal(more.gpuLayers, -1);
  assert.equal(more.secondLook, false);
  assert.equal(more.readAhead, false);
  assert.equal(more.preload, false);
  assert.equal(more.contextTokens, 0);
  assert.equal(more.editIntervalMs, 0);
  assert.equal(more.prefixCacheMb, 64);
  assert.equal(logic.initializationOptions({ ...base, gpuLayers: 0 }).gpuLayers, 0);
});

test("recent instructions: newest first, no duplicates, bounded", () => {
  assert.deepEqual(logic.remember(["a", "b"], "b"), ["b", "a"]);
  assert.deepEqual(logic.remember(["a"], "  "), ["a"]);
  assert.equal(logic.remember(Array.from({ length: 20 }, (_, i) => `i${i}`), "new", 10).length, 10);
});

test("rewrite arguments carry the instruction and the progress token", () => {
  const args = logic.rewriteArguments({ uri: "file:///a.py", position: { line: 3, character: 1 } }, "Add hints", "tok");
  assert.deepEqual(args, { uri: "file:///a.py", position: { line: 3, character: 1 }, instruction: "Add hints",
    workDoneToken: "tok" });
});

test("server settings name every setting, an empty one as null (the server's default again)", () => {
  const sent = logic.serverSettings(base);
  for (const key of ["maxTokens", "model", "draftModel", "threads", "gpuLayers", "contextTokens", "editIntervalMs", "prefixCacheMb"]) {
    assert.equal(sent[key], null, key);
  }
  assert.equal(sent.temperature, 0);
  const set = logic.serverSettings({ ...base, maxTokens: 300, prefixCacheMb: 0, model: "tiny" });
  assert.equal(set.maxTokens, 300);
  assert.equal(set.prefixCacheMb, 0);
  assert.equal(set.model, "tiny");
});

test("a lost connection is named as the server stopping; other errors are kept as they are", () => {
  assert.equal(logic.failureMessage("Pending response rejected since connection got disposed"),
    "the language server stopped during the rewrite");
  assert.equal(logic.failureMessage("Connection is closed."), "the language server stopped during the rewrite");
  assert.equal(logic.failureMessage("no function, method or class there"), "no function, method or class there");
});

test("the document without a rewrite's edits keeps what the user typed elsewhere, and gives up where they meet", () => {
  const base = "import os\n\ndef f():\n    return 1\n\nx = 2\n";
  const ours = "import os\n\ndef f():\n    return 42  # half\n\nx = 2\n";
  // Nothing else happened: base as it was.
  assert.equal(logic.withoutRewrite(base, ours, ours), base);
  // A line typed above the function, and one below it: carried over.
  assert.equal(logic.withoutRewrite(base, ours, "# top\n" + ours), "# top\n" + base);
  assert.equal(logic.withoutRewrite(base, ours, ours.replace("x = 2", "x = 3")), base.replace("x = 2", "x = 3"));
  assert.equal(logic.withoutRewrite(base, ours, ours + "y = 4\n"), base + "y = 4\n");
  // Typed inside what the rewrite changed, or both above and below at once: not told apart.
  assert.equal(logic.withoutRewrite(base, ours, ours.replace("42", "43")), undefined);
  assert.equal(logic.withoutRewrite(base, ours, "# top\n" + ours + "y = 4\n"), undefined);
  // Or right at its edge: a letter typed just after the rewrite's text could belong to either.
  assert.equal(logic.withoutRewrite(base, ours, ours.replace("# half", "# half!")), undefined);
  assert.equal(logic.withoutRewrite(base, ours, ours.replace("return 42", "return -42")), undefined);
  // The rewrite had changed nothing yet: everything is the user's.
  assert.equal(logic.withoutRewrite(base, base, "# top\n" + base), "# top\n" + base);
  // Step by step: two changes by the user between the rewrite's edits.
  const ours2 = "# top\n" + ours.replace("# half", "# half more");
  const base1 = logic.withoutRewrite(base, ours, "# top\n" + ours);
  assert.equal(logic.withoutRewrite(base1, ours2, ours2 + "z\n"), "# top\n" + base + "z\n");
  assert.deepEqual(logic.changedSpan("abcXdef", "abcYYdef"), [3, 4, 5]);
  assert.deepEqual(logic.changedSpan("aaa", "aaaa"), [3, 3, 4]);
});

test("lines: the lines of a span of characters, for the output channel", () => {
  const text = "a\nbb\ncc\nd\n";
  assert.equal(logic.lines(text, 0, 1), "line 1");
  assert.equal(logic.lines(text, 2, 4), "line 2");
  assert.equal(logic.lines(text, 2, 5), "line 2"); // "bb\n": a line with its newline is that line alone
  assert.equal(logic.lines(text, 2, 6), "lines 2-3");
  assert.equal(logic.lines(text, 3, 8), "lines 2-3");
  assert.equal(logic.lines(text, 5, 5), "line 3"); // empty: the line it is on
});
