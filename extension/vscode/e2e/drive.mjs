// Drives a real VS Code (code-server) in headless Chromium the way a user would, and reports what it saw.
// Run by tests/test_vscode_real.py, which installs the packaged extension, starts code-server and checks the
// report against the rewrite's answer as its speculation trace shows it. Every wait is bounded; a step that times
// out throws. The last steps kill the language server half-way through a rewrite.
//
// Environment: EDITSPEC_E2E_URL (code-server's workbench URL with ?folder=), EDITSPEC_E2E_FILE (the file,
// relative to the workspace), EDITSPEC_E2E_LINE (1-based line inside the function), EDITSPEC_E2E_INSTRUCTION,
// EDITSPEC_E2E_CANCEL_INSTRUCTION, EDITSPEC_E2E_OUT (directory for report.json and screenshots),
// EDITSPEC_E2E_CHROMIUM (the browser), EDITSPEC_E2E_PLAYWRIGHT (playwright-core's package directory),
// EDITSPEC_E2E_SERVER (`pkill -f`'s pattern for the language server's command line).
import { createRequire } from "node:module";
import { execSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const require = createRequire(import.meta.url);
const { chromium } = require(env("EDITSPEC_E2E_PLAYWRIGHT"));
const OUT = env("EDITSPEC_E2E_OUT");
const FILE = env("EDITSPEC_E2E_FILE");
const WORKSPACE_FILE = env("EDITSPEC_E2E_PATH");
const report = { steps: [] };
const log = (step, detail = {}) => {
  report.steps.push({ step, at: Date.now(), ...detail });
  console.log(`[e2e] ${step} ${JSON.stringify(detail)}`);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The text Monaco shows in the active editor (all lines are visible: the sample is short). */
async function editorText(page) {
  return page.evaluate(() => {
    const editor = document.querySelector(".editor-group-container.active .monaco-editor .view-lines");
    if (!editor) return null;
    const lines = [...editor.querySelectorAll(".view-line")].map((el) => ({
      top: parseFloat(el.style.top || "0"),
      text: (el.textContent || "").replace(/\u00a0/g, " "),
    }));
    lines.sort((a, b) => a.top - b.top);
    return lines.map((l) => l.text).join("\n");
  });
}

async function waitFor(what, predicate, timeoutMs, intervalMs = 50) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 10000 });
  await input.fill(`>${title}`);
  const row = page.locator(".quick-input-widget .monaco-list-row", { hasText: title }).first();
  await row.waitFor({ state: "visible", timeout: 10000 });
  await page.keyboard.press("Enter");
}

async function askRewrite(page, instruction) {
  await runCommand(page, "EditSpec: Rewrite Function");
  const input = page.locator(".quick-input-widget input");
  await waitFor(
    "the instruction box",
    async () => (await input.getAttribute("placeholder"))?.includes("instruction"),
    10000,
  );
  await input.fill(instruction);
  await page.keyboard.press("Enter");
}

// A rewrite's progress notification: EditSpec's toast with a Cancel button. Not a message the server showed (a
// warning that the new code reads a name nothing defines stays up until dismissed, and is no rewrite running).
const progressShown = (page) =>
  page.locator(".notifications-toasts .notification-toast", { hasText: "EditSpec" })
    .filter({ has: page.locator(".monaco-button", { hasText: "Cancel" }) })
    .count();

/** The editor's text once a running rewrite has changed it, or "finished" if it ended first. */
async function firstStreamedEdit(page, original) {
  return waitFor("the first streamed edit", async () => {
    const text = await editorText(page);
    if (text !== null && text !== original) return text;
    if (!(await progressShown(page))) return "finished";
    return null;
  }, 120000, 10);
}

/** Saves the file and reads it from disk: the exact text, line ends and all. */
async function savedText(page) {
  await page.keyboard.press("Control+S");
  await sleep(300);
  await waitFor("the save", async () => !(await page.locator(".tab.active.dirty").count()), 10000);
  return readFileSync(WORKSPACE_FILE, "utf8");
}

/** Opens a workspace file with Quick Open, as a user would, and waits for its editor. */
async function openFile(page, name) {
  await page.keyboard.press("Control+P");
  const quick = page.locator(".quick-input-widget input");
  await quick.waitFor({ state: "visible", timeout: 10000 });
  await quick.fill(name);
  // The focused row, not any row: a file opened before is listed (and another one focused) before the filter runs.
  await page.locator(".quick-input-widget .monaco-list-row.focused", { hasText: name }).first().waitFor({ timeout: 10000 });
  await page.keyboard.press("Enter");
  try {
    await waitFor(`${name} in the editor`, async () => (await page.locator(".tab.active", { hasText: name }).count()) > 0, 10000);
  } catch (e) {
    await page.screenshot({ path: join(OUT, "open-failed.png") });
    throw e;
  }
}

/** Focus the file's editor with a click on its text: a key press can go to the trace's webview, which may take
 * the focus back after it loads (Ctrl+1, then Ctrl+G, were lost there once). */
async function focusFileEditor(page) {
  await page.locator(".editor-group-container .monaco-editor .view-lines").first().click({ position: { x: 5, y: 5 } });
}

/** The line the cursor is on, from the status bar ("Ln 14, Col 1"); null when it shows none. */
async function cursorLine(page) {
  const item = page.locator(".statusbar-item", { hasText: /Ln \d+, Col \d+/ }).first();
  const text = await item.innerText({ timeout: 1000 }).catch(() => "");
  const match = /Ln (\d+)/.exec(text);
  return match ? Number(match[1]) : null;
}

/** Ctrl+End, then waits until the status bar shows the cursor on the file's last line; the key goes again when it
 * was lost (the editor not focused yet after the instruction's box closed). Returns that line. */
async function toEndOfFile(page) {
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press("Control+End");
    try {
      return await waitFor("the cursor on the last line", async () => {
        const text = await editorText(page);
        const at = await cursorLine(page);
        return text !== null && at === text.split("\n").length ? at : null;
      }, 2000, 25);
    } catch (e) {
      if (attempt === 3) throw e;
      log("Ctrl+End lost", { attempt, cursor: await cursorLine(page) });
      await focusFileEditor(page);
    }
  }
}

async function moveCursor(page, line) {
  const input = page.locator(".quick-input-widget input");
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press("Control+G");
    try {
      await input.waitFor({ state: "visible", timeout: 3000 });
      break;
    } catch (e) {
      if (attempt === 3) throw e;
      await focusFileEditor(page); // the key went elsewhere: focus the editor and ask again
    }
  }
  await input.fill(`:${line}:5`);
  await page.keyboard.press("Enter");
  await sleep(200);
}

const browser = await chromium.launch({
  executablePath: env("EDITSPEC_E2E_CHROMIUM"),
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(20000);
  await page.goto(env("EDITSPEC_E2E_URL"), { waitUntil: "domcontentloaded", timeout: 60000 });
  await page.locator(".monaco-workbench").waitFor({ state: "visible", timeout: 60000 });
  log("workbench");

  // Open the file with Quick Open, as a user would.
  await sleep(1000);
  await openFile(page, FILE);
  const original = await waitFor("the file in the editor", async () => {
    const text = await editorText(page);
    return text && text.length > 10 ? text : null;
  }, 20000);
  log("opened", { lines: original.split("\n").length });
  const originalOnDisk = readFileSync(WORKSPACE_FILE, "utf8");

  // Wait until the extension's server is up: its commands are in the palette once it activated.
  const line = Number(env("EDITSPEC_E2E_LINE"));
  await moveCursor(page, line);

  // 1. Rewrite: watch the function change while the model writes.
  await askRewrite(page, env("EDITSPEC_E2E_INSTRUCTION"));
  log("rewrite asked");
  const states = [];
  let screenshot = null;
  let sawProgress = false;
  const started = Date.now();
  for (;;) {
    const text = await editorText(page);
    if (text !== null && text !== (states.length ? states[states.length - 1] : original)) {
      states.push(text);
      if (!screenshot && states.length >= 1) {
        screenshot = join(OUT, "mid-rewrite.png");
        await page.screenshot({ path: screenshot });
      }
    }
    const showing = (await progressShown(page)) > 0;
    sawProgress = sawProgress || showing;
    if (sawProgress && !showing) break;
    if (Date.now() - started > 240000) throw new Error("the rewrite did not finish within 240 s");
    await sleep(25);
  }
  // The final edit can reach the screen just after the progress closes (seen once in CI, on a busy machine): keep
  // reading the editor for a second, so that the last state is what it settles on.
  for (let i = 0; i < 20; i++) {
    await sleep(50);
    const text = await editorText(page);
    if (text !== null && text !== (states.length ? states[states.length - 1] : original)) states.push(text);
  }
  const afterRewrite = await savedText(page);
  log("rewrite done", { states: states.length, seconds: (Date.now() - started) / 1000 });
  // The server's warning when the new code reads a name nothing defines: the toast's text, or null if none came
  // within 5 s (the server sends it before the rewrite's answer, so it is up by now when it comes at all).
  const warning = await waitFor("the undefined-name warning", async () => {
    const toasts = page.locator(".notifications-toasts .notification-toast", { hasText: "does not define" });
    return (await toasts.count()) ? toasts.first().innerText() : null;
  }, 5000, 100).catch(() => null);

  // 2. One undo gives the original file back.
  await page.keyboard.press("Control+Z");
  await sleep(300);
  const afterUndo = await savedText(page);
  log("undone");

  // 3. Another rewrite, cancelled from the notification's Cancel button once the function has started to change.
  await moveCursor(page, line);
  await askRewrite(page, env("EDITSPEC_E2E_CANCEL_INSTRUCTION"));
  const cancelStarted = Date.now();
  const cancelButton = page.locator(".notifications-toasts .notification-toast", { hasText: "EditSpec" })
    .locator(".monaco-button", { hasText: "Cancel" });
  await cancelButton.first().waitFor({ state: "visible", timeout: 120000 });
  const changedBeforeCancel = await firstStreamedEdit(page, original);
  await cancelButton.first().click({ timeout: 5000 });
  log("cancel clicked", { changedBeforeCancel: changedBeforeCancel !== "finished", seconds: (Date.now() - cancelStarted) / 1000 });
  await waitFor("the notification to close", async () => !(await progressShown(page)), 60000);
  await sleep(500);
  const afterCancel = await savedText(page);
  log("cancelled");

  // 4. The speculation trace in a webview.
  await runCommand(page, "EditSpec: Show Speculation");
  const webviewText = await waitFor("the trace webview", async () => {
    for (const frame of page.frames()) {
      try {
        const text = await frame.evaluate(() => document.body ? document.body.innerText : "");
        if (text && /draft|accepted|speculation/i.test(text) && frame !== page.mainFrame()) return text;
      } catch {
        // frames come and go while the webview loads
      }
    }
    return null;
  }, 30000, 250);
  await page.screenshot({ path: join(OUT, "trace.png") });
  log("trace shown");

  // 5. The language server dies (killed) half-way through a rewrite, after the user typed a line at the end of the
  // file while it streamed: the extension puts the function back and keeps that line.
  await focusFileEditor(page); // back to the file's editor group (the trace opened beside it)
  await moveCursor(page, line);
  await askRewrite(page, env("EDITSPEC_E2E_CANCEL_INSTRUCTION"));
  await waitFor("the rewrite's notification", async () => (await progressShown(page)) > 0, 120000, 10);
  const changedBeforeKill = await firstStreamedEdit(page, original);
  const lastLine = await toEndOfFile(page);
  await page.keyboard.type(env("EDITSPEC_E2E_TYPED"));
  const typedMidway = (await progressShown(page)) > 0;
  execSync(`pkill -KILL -f '${env("EDITSPEC_E2E_SERVER")}'`);
  // The user types on: each key is a change the client writes to the dead server's pipe.
  await page.keyboard.type(env("EDITSPEC_E2E_TYPED_AFTER"));
  log("server killed", { changedBeforeKill: changedBeforeKill !== "finished", typedMidway, lastLine, cursor: await cursorLine(page) });
  let killMessage;
  let toastsAfterKill;
  try {
    killMessage = await waitFor("the message after the kill", async () => {
      const toasts = page.locator(".notifications-toasts .notification-toast", { hasText: "back as it was" });
      return (await toasts.count()) ? toasts.first().innerText() : null;
    }, 30000, 100);
    toastsAfterKill = await page.locator(".notifications-toasts .notification-toast").allInnerTexts();
  } catch (e) {
    // What the user saw instead: every toast's text, every notification (a toast hides after a while), the editor's
    // text and a screenshot.
    const toasts = await page.locator(".notifications-toasts .notification-toast").allInnerTexts();
    await runCommand(page, "Notifications: Show Notifications").catch(() => undefined);
    const notifications = await page.locator(".notifications-center .notification-list-item").allInnerTexts();
    log("no put-back message", { toasts, notifications, editor: await editorText(page) });
    await page.screenshot({ path: join(OUT, "after-kill.png") });
    throw e;
  }
  await page.screenshot({ path: join(OUT, "after-kill.png") });
  const afterKill = await savedText(page);
  log("put back after the kill");

  // 6. Again, with the user looking at another file when the server dies: the language client starts the server
  // again after a crash; the rewrite's file goes out of view after its first streamed edit (the other file opened
  // in its place), so its later edits come while it is not shown, and the put-back must still happen.
  await runCommand(page, "Notifications: Clear All Notifications"); // only this rewrite's toasts from here on
  await waitFor("no toasts", async () => !(await page.locator(".notifications-toasts .notification-toast").count()), 10000);
  await openFile(page, env("EDITSPEC_E2E_OTHER_FILE"));
  await openFile(page, FILE);
  // With the line typed in step 5. Read once the view shows this file: just after Quick Open it can still show the
  // other file's lines, and any later read would then look like a streamed edit.
  const beforeHidden = await waitFor("the file's text in its editor", async () => {
    const text = await editorText(page);
    return text !== null && text.trimEnd() === afterKill.replace(/\r\n/g, "\n").trimEnd() ? text : null;
  }, 10000, 50);
  await moveCursor(page, line);
  await askRewrite(page, env("EDITSPEC_E2E_CANCEL_INSTRUCTION"));
  await waitFor("the rewrite's notification", async () => (await progressShown(page)) > 0, 120000, 10);
  const changedBeforeHide = await firstStreamedEdit(page, beforeHidden);
  await openFile(page, env("EDITSPEC_E2E_OTHER_FILE"));
  const streamedWhileHidden = await progressShown(page); // the rewrite still running when its file went out of view
  execSync(`pkill -KILL -f '${env("EDITSPEC_E2E_SERVER")}'`);
  log("server killed, the file not shown", { changedBeforeHide: changedBeforeHide !== "finished", streamedWhileHidden });
  const hiddenKillMessage = await waitFor("the message after the second kill", async () => {
    const toasts = page.locator(".notifications-toasts .notification-toast", { hasText: "server stopped" });
    return (await toasts.count()) ? toasts.first().innerText() : null;
  }, 30000, 100);
  await openFile(page, FILE);
  const afterHiddenKill = await savedText(page);
  log("after the kill with the file not shown");

  Object.assign(report, {
    original: originalOnDisk,
    states,
    afterRewrite,
    warning,
    afterUndo,
    afterCancel,
    cancelledMidway: changedBeforeCancel !== "finished",
    killedMidway: changedBeforeKill !== "finished",
    typedMidway,
    killMessage,
    toastsAfterKill,
    afterKill,
    hiddenMidway: changedBeforeHide !== "finished" && streamedWhileHidden > 0,
    hiddenKillMessage,
    afterHiddenKill,
    webviewText: webviewText.slice(0, 4000),
    screenshot,
  });
} finally {
  writeFileSync(join(OUT, "report.json"), JSON.stringify(report, null, 1));
  await browser.close();
}
