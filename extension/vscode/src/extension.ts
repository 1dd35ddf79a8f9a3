// EditSpec for VS Code: starts editspec-lsp and turns "rewrite this function" into a command with an
// instruction box, a cancellable progress notification, and the whole rewrite as one undo step.
import * as vscode from "vscode";
import {
  ApplyWorkspaceEditParams,
  ApplyWorkspaceEditRequest,
  ApplyWorkspaceEditResult,
  CodeActionRequest,
  DidChangeConfigurationNotification,
  ErrorAction,
  ErrorHandler,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
} from "vscode-languageclient/node";

import {
  EditSpecSettings,
  RewriteArgs,
  SERVER_PROCESS_SETTINGS,
  changedSpan,
  failureMessage,
  initializationOptions,
  lines,
  remember,
  rewriteArguments,
  serverCommand,
  serverSettings,
  withoutRewrite,
} from "./logic";

const LANGUAGES = [
  "python",
  "javascript",
  "javascriptreact",
  "typescript",
  "typescriptreact",
  "go",
  "rust",
  "java",
  "c",
  "cpp",
  "csharp",
  "ruby",
  "php",
  "kotlin",
  "lua",
  "swift",
  "shellscript",
];
const RECENT_KEY = "editspec.recentInstructions";
/** How long the put-back waits for VS Code to say whether an edit went in: the rewrite's last, or its own. */
export const LAST_EDIT_WAIT_MS = { value: 5000 };
/** How long the put-back goes on trying while VS Code refuses it, each time because a key landed first (the
 * user typing on: a put-back made for the text as it was is refused once the text moved on). */
export const PUT_BACK_WAIT_MS = { value: 10000 };

let client: LanguageClient | undefined;
/** A rewrite running in a document: its edits so far, and what it takes to put the document back without them. */
interface Running {
  token: string;
  uri: string;
  /** The edits VS Code applied so far. */
  edits: number;
  cancel: () => void;
  /** The document without the rewrite's edits: as it was before the first, with what the user changed elsewhere
   * since (undefined before the first edit). */
  base?: string;
  /** The user changed something the rewrite had changed too: the two cannot be told apart. */
  tangled?: boolean;
  /** The document's text after the rewrite's latest edit. */
  ours?: string;
  /** The edit being applied now, if any. */
  pending?: Pending;
  /** Some edits went in while the file was not shown, each its own undo step. */
  ungrouped?: boolean;
}
/** An edit of a rewrite on its way into the document: the text it was made for, what base and ours become once it
 * is in, and VS Code's answer (which settles once `ours` has it). */
interface Pending {
  before: string;
  base?: string;
  made: string;
  shown: boolean;
  answer: Thenable<boolean>;
}
/** The rewrites running, by document (the server runs one per document; rewrites of other documents queue there
 * while this one streams, so each edit goes to the rewrite of its own document). */
const running = new Map<string, Running>();

/** A line in the EditSpec output channel (what became of each rewrite). */
function log(message: string): void {
  client?.outputChannel.appendLine(`[${new Date().toISOString()}] ${message}`);
}

/** The open document with this URI, shown in an editor or not. */
function openDocument(uri: string): vscode.TextDocument | undefined {
  return vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri);
}

function position(p: { line: number; character: number }): vscode.Position {
  return new vscode.Position(p.line, p.character);
}

/** The document's text without the rewrite's edits, given its text now (undefined when that cannot be told). */
function withoutEdits(state: Running, now: string): string | undefined {
  if (state.tangled) return undefined;
  if (state.ours === undefined) return now; // none of its edits went in yet
  if (now === state.ours) return state.base;
  const base = withoutRewrite(state.base as string, state.ours, now);
  if (base === undefined) {
    state.tangled = true;
    const [from, , oursEnd] = changedSpan(state.base as string, state.ours);
    const [start, end] = changedSpan(state.ours, now);
    log(`the user changed ${lines(state.ours, start, end)} while the rewrite had changed ${lines(state.ours, from, oursEnd)}`);
  }
  return base;
}

/**
 * workspace/applyEdit, with the edits of a running rewrite joined into one undo step: the first opens it,
 * the rest leave no undo stop between them. Anything else goes through VS Code's own applyEdit, and so does a
 * rewrite's edit while its file is not shown (only a shown editor can join edits; the edit still counts as the
 * rewrite's, to put the function back should the server stop). An edit made for another version of the document
 * than the one open is refused, as vscode-languageclient's own handler does (the server computes it again), and so
 * is a rewrite's edit for a document closed meanwhile: opening it again to apply half a rewrite would leave that in
 * a file the user no longer sees.
 */
export async function applyEdit(params: ApplyWorkspaceEditParams): Promise<ApplyWorkspaceEditResult> {
  const change = params.edit.documentChanges?.[0];
  const uri = change && "textDocument" in change ? change.textDocument.uri : Object.keys(params.edit.changes ?? {})[0];
  const edits = change && "edits" in change ? change.edits : (params.edit.changes ?? {})[uri] ?? [];
  const version = change && "textDocument" in change ? change.textDocument.version : null;
  const editor = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === uri);
  const state = running.get(uri);
  const doc = editor?.document ?? openDocument(uri);
  if ((state && !doc) || (doc && typeof version === "number" && doc.version !== version)) return { applied: false };
  if (!state || !doc) {
    const converted = await client!.protocol2CodeConverter.asWorkspaceEdit(params.edit);
    return { applied: await vscode.workspace.applyEdit(converted) };
  }
  const first = state.ours === undefined;
  const before = doc.getText();
  // Kept only once VS Code applied the edit: a refused edit (the user typed meanwhile) leaves base and ours as they
  // were, still a pair, and the next edit or the put-back works from them.
  const base = withoutEdits(state, before);
  // The text this edit makes, worked out here: by the time VS Code says it applied the edit, the user may have typed
  // more, and that is not the rewrite's. (VS Code applies it to this very version of the text, or not at all.)
  const made = edits
    .map((e) => ({ start: doc.offsetAt(position(e.range.start)), end: doc.offsetAt(position(e.range.end)), text: e.newText }))
    .sort((a, b) => b.start - a.start)
    .reduce((text, e) => text.slice(0, e.start) + e.text + text.slice(e.end), before);
  let applying: Thenable<boolean>;
  if (editor) {
    applying = editor.edit(
      (builder) => {
        for (const e of edits) builder.replace(new vscode.Range(position(e.range.start), position(e.range.end)), e.newText);
      },
      { undoStopBefore: first, undoStopAfter: false },
    );
  } else {
    applying = Promise.resolve(client!.protocol2CodeConverter.asWorkspaceEdit(params.edit)).then((converted) =>
      vscode.workspace.applyEdit(converted),
    );
  }
  const pending = { before, base, made, shown: editor !== undefined } as Pending; // its answer is set next
  pending.answer = applying.then((applied) => {
    // (Unless the put-back stopped waiting for this answer and settled the edit from the text meanwhile.)
    if (state.pending === pending) {
      state.pending = undefined;
      if (applied) settle(state, pending);
    }
    return applied;
  });
  state.pending = pending;
  return { applied: await pending.answer };
}

/** An edit of the rewrite went in: base, ours and the count move together. */
function settle(state: Running, edit: Pending): void {
  Object.assign(state, { base: edit.base, ours: edit.made, edits: state.edits + 1 });
  state.ungrouped ||= !edit.shown;
}

/**
 * After a rewrite that failed half-way (the server stopped while it streamed): the rewrite's edits taken back, and
 * nothing else: what the user typed elsewhere in the file meanwhile stays (in the rewrite's undo step when the file
 * is shown). When the user changed the function itself too, the two cannot be told apart: then the user is told
 * that Undo takes it back. Returns what to add to the error message.
 */
export async function putBack(state: Running): Promise<string> {
  const steps = state.ungrouped ? " (a step for each edit made while the file was not shown)" : "";
  const halfWay = `; the rewrite stopped half-way through the function: Undo takes it back${steps}`;
  // The server may die while its last edit is still being applied here: that edit is the rewrite's too. Should
  // VS Code not say within the wait whether it went in, the text says it: the text it was made for or the text it
  // makes. When the user changed the text as well, the two cannot be told apart: nothing is put back (rather than
  // keep that edit as if the user had typed it).
  const edit = state.pending;
  const settled = edit === undefined || (await answerWithin(edit.answer, LAST_EDIT_WAIT_MS.value)) !== undefined;
  if (!settled && state.pending === edit) {
    // No answer: the text says whether the edit went in, unless the user changed it too meanwhile.
    const now = openDocument(state.uri)?.getText();
    state.pending = undefined;
    const wait = `put-back: VS Code did not say within ${LAST_EDIT_WAIT_MS.value} ms whether the last edit went in`;
    if (now === edit.made) {
      log(`${wait}; it is in the text`);
      settle(state, edit);
    } else if (now === edit.before) {
      log(`${wait}; it is not in the text`);
    } else {
      log(`${wait}, and the text changed otherwise too; nothing put back`);
      return state.edits > 0
        ? halfWay
        : "; whether the rewrite's first edit went in cannot be told (VS Code did not say): check the function, Undo takes it back if it did";
    }
  }
  if (state.edits === 0) return "";
  // VS Code refuses an edit made for a text the user has changed meanwhile (a key pressed while it travels to the
  // window): then it is worked out again from the text as it is now, after a pause that grows (keys come in
  // bursts: the attempts made within one all find the text moved on), for as long as PUT_BACK_WAIT_MS allows.
  const deadline = Date.now() + PUT_BACK_WAIT_MS.value;
  for (let attempt = 1; ; attempt++) {
    const editor = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === state.uri);
    const doc = editor?.document ?? openDocument(state.uri);
    if (!doc) {
      log("put-back: the document is closed");
      return halfWay;
    }
    const now = doc.getText();
    const base = withoutEdits(state, now);
    if (base === undefined) {
      log("put-back: the user changed text the rewrite had changed too; nothing put back");
      return halfWay;
    }
    if (now === base) return ""; // the server put it back itself
    const [start, end, baseEnd] = changedSpan(now, base);
    const range = new vscode.Range(doc.positionAt(start), doc.positionAt(end));
    log(`put-back: replacing ${lines(now, start, end)} (attempt ${attempt})`);
    const putting = replace(editor, doc, range, base.slice(start, baseEnd));
    const applied = await answerWithin(putting, LAST_EDIT_WAIT_MS.value);
    if (applied === true) return "; the function is back as it was";
    if (applied === undefined) {
      // No answer: the text says whether it went in, unless the user changed it too meanwhile. A later attempt
      // could find this one landed after all, and take the function put back for the user's change.
      const wait = `put-back: VS Code did not say within ${LAST_EDIT_WAIT_MS.value} ms whether the put-back went in`;
      if (doc.getText() === base) {
        log(`${wait}; it is in the text`);
        return "; the function is back as it was";
      }
      log(`${wait}, and it is not in the text as it is; no more attempts`);
      return (
        "; the rewrite stopped half-way through the function, and whether putting it back worked cannot be told" +
        " (VS Code did not say): check the function, Undo takes it back"
      );
    }
    const pause = Math.min(50 * 2 ** (attempt - 1), 1000);
    if (Date.now() + pause > deadline) {
      const kept = `the text kept changing for ${PUT_BACK_WAIT_MS.value} ms, no more attempts`;
      log(`put-back: VS Code refused the edit (attempt ${attempt}); ${kept}`);
      return halfWay;
    }
    log(`put-back: VS Code refused the edit (attempt ${attempt}); trying again in ${pause} ms`);
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

/** A thenable's value, or undefined if it has not settled within `ms` (a rejection counts as false). */
async function answerWithin(answer: Thenable<boolean>, ms: number): Promise<boolean | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const settled = await Promise.race([
    Promise.resolve(answer).then(
      (value) => value,
      () => false,
    ),
    new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), ms);
    }),
  ]);
  clearTimeout(timer);
  return settled;
}

/** Replaces a range of the document: in its shown editor, closing the rewrite's undo step there, else as a
 * workspace edit. Whether VS Code applied it. */
async function replace(
  editor: vscode.TextEditor | undefined,
  doc: vscode.TextDocument,
  range: vscode.Range,
  text: string,
): Promise<boolean> {
  if (editor) {
    return editor.edit((builder) => builder.replace(range, text), { undoStopBefore: false, undoStopAfter: true });
  }
  const edit = new vscode.WorkspaceEdit();
  edit.replace(doc.uri, range, text);
  return vscode.workspace.applyEdit(edit);
}

export function readSettings(): EditSpecSettings {
  const c = vscode.workspace.getConfiguration("editspec");
  return {
    serverCommand: c.get<string[]>("serverCommand", []),
    python: c.get<string>("python", ""),
    model: c.get<string>("model", "coder"),
    draftModel: c.get<string>("draftModel", ""),
    threads: c.get<number | null>("threads", null),
    gpuLayers: c.get<number | null>("gpuLayers", null),
    temperature: c.get<number>("temperature", 0),
    maxTokens: c.get<number | null>("maxTokens", null),
    streaming: c.get<"edits" | "final">("streaming", "edits"),
    presets: c.get<string[]>("presets", []),
    readAhead: c.get<boolean>("readAhead", true),
    secondLook: c.get<boolean>("secondLook", true),
    preload: c.get<boolean>("preload", true),
    contextTokens: c.get<number | null>("contextTokens", null),
    editIntervalMs: c.get<number | null>("editIntervalMs", null),
    prefixCacheMb: c.get<number | null>("prefixCacheMb", null),
  };
}

function createClient(context: vscode.ExtensionContext): LanguageClient {
  const settings = readSettings();
  const { command, args } = serverCommand(settings);
  const serverOptions: ServerOptions = { command, args };
  let restarts: ErrorHandler | undefined; // vscode-languageclient's own, made once the client is
  const clientOptions: LanguageClientOptions = {
    documentSelector: LANGUAGES.map((language) => ({ scheme: "file", language })),
    initializationOptions: initializationOptions(settings),
    connectionOptions: { maxRestartCount: MAX_RESTARTS },
    // A server that died (a crash, a kill) is started again, and the user hears of it from the rewrite it broke
    // ("the function is back as it was"). Every key typed meanwhile is a write to its closed pipe: with the
    // default handler each failed write was an error toast of its own (three of them hid the put-back's message)
    // and the fourth shut the client down for good, with no server for the next rewrite.
    errorHandler: {
      error: (error) => {
        log(`the connection to the server failed: ${error.message}`);
        return { action: ErrorAction.Continue, handled: true };
      },
      closed: () => (restarts ??= languageClient.createDefaultErrorHandler(MAX_RESTARTS)).closed(),
    },
    middleware: {
      // (the server started again reads the whole document when it is opened there)
      didChange: (event, next) =>
        next(event).catch((e: Error) => log(`a change of ${event.document.uri.toString()} not sent: ${e.message}`)),
      // Code actions carry `editspec.rewrite`: run it through our flow (instruction box, progress, one undo).
      executeCommand: async (cmd, cmdArgs, next) => {
        if (cmd === "editspec.rewrite" && cmdArgs.length === 1) {
          return rewrite(context, cmdArgs[0] as RewriteArgs);
        }
        return next(cmd, cmdArgs);
      },
    },
  };
  const languageClient = new LanguageClient("editspec", "EditSpec", serverOptions, clientOptions);
  return languageClient;
}

/** How often the server is started again after it dies, within 3 minutes (vscode-languageclient's rule). */
const MAX_RESTARTS = 2;

async function askInstruction(context: vscode.ExtensionContext): Promise<string | undefined> {
  const recent = context.globalState.get<string[]>(RECENT_KEY, []);
  const pick = vscode.window.createQuickPick();
  pick.title = "EditSpec: how should this function change?";
  pick.placeholder = "Type an instruction, or pick a recent one";
  pick.items = recent.map((label) => ({ label }));
  pick.onDidChangeValue((value) => {
    const typed = value.trim() ? [{ label: value }] : [];
    pick.items = [...typed, ...recent.filter((r) => r !== value).map((label) => ({ label }))];
  });
  const chosen = await new Promise<string | undefined>((resolve) => {
    pick.onDidAccept(() => resolve(pick.selectedItems[0]?.label ?? pick.value));
    pick.onDidHide(() => resolve(undefined));
    pick.show();
  });
  pick.dispose();
  if (chosen && chosen.trim()) {
    await context.globalState.update(RECENT_KEY, remember(recent, chosen));
    return chosen.trim();
  }
  return undefined;
}

/** Rewrite the function at `base` (asking for the instruction when it has none). */
export async function rewrite(context: vscode.ExtensionContext, base?: RewriteArgs): Promise<unknown> {
  if (!client) {
    vscode.window.showErrorMessage("EditSpec: the language server is not running");
    return undefined;
  }
  const editor = vscode.window.activeTextEditor;
  if (!base) {
    if (!editor) {
      vscode.window.showErrorMessage("EditSpec: open a file and put the cursor inside a function");
      return undefined;
    }
    const p = editor.selection.active;
    base = { uri: editor.document.uri.toString(), position: { line: p.line, character: p.character } };
  }
  if (!base.instruction) {
    // Asking for code actions lets the server read the prompt ahead while the user types the instruction.
    const at = base.position;
    if (at) {
      client
        .sendRequest(CodeActionRequest.type, {
          textDocument: { uri: base.uri },
          range: { start: at, end: at },
          context: { diagnostics: [], only: ["refactor.rewrite"] },
        })
        .catch(() => undefined);
    }
  }
  const instruction = base.instruction ?? (await askInstruction(context));
  if (!instruction) return undefined;
  const uri = (base as RewriteArgs).uri;
  if (running.has(uri)) {
    // Taking its place would hand that rewrite's edits to this one (and its put-back, should the server stop).
    vscode.window.showWarningMessage(
      "EditSpec: a rewrite is already running in this document: wait for it or cancel it",
    );
    return undefined;
  }
  const token = `editspec-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  const lc = client;
  return vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: "EditSpec", cancellable: true },
    async (progress, cancellation) => {
      const cancel = () => lc.sendNotification(WorkDoneProgressCancelNotification.type, { token });
      const state: Running = { token, uri, edits: 0, cancel };
      running.set(uri, state);
      const listener = lc.onProgress(WorkDoneProgress.type, token, (value) => {
        if (value.kind !== "end" && value.message) progress.report({ message: value.message });
      });
      const onCancel = cancellation.onCancellationRequested(cancel);
      try {
        const result = (await lc.sendRequest(ExecuteCommandRequest.type, {
          command: "editspec.rewrite",
          arguments: [rewriteArguments(base as RewriteArgs, instruction, token)],
        })) as { applied?: boolean; reason?: string; message?: string } | undefined;
        log(`rewrite of ${uri} ended: ${result ? JSON.stringify({ ...result, stats: undefined }) : "no result"}`);
        if (result && result.applied === false && result.reason !== "cancelled") {
          vscode.window.showWarningMessage(`EditSpec: not applied (${result.message ?? result.reason})`);
        }
        return result;
      } catch (e) {
        running.delete(uri); // no more edits of this rewrite: putting the document back is not one of them
        log(`rewrite of ${uri} failed after ${state.edits} edits: ${(e as Error).message}`);
        const message = `EditSpec: ${failureMessage((e as Error).message)}${await putBack(state)}`;
        log(message);
        vscode.window.showErrorMessage(message);
        return undefined;
      } finally {
        listener.dispose();
        onCancel.dispose();
        running.delete(uri);
      }
    },
  );
}

async function showSpeculation(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!client || !editor) return;
  try {
    const result = (await client.sendRequest(ExecuteCommandRequest.type, {
      command: "editspec.trace",
      arguments: [editor.document.uri.toString()],
    })) as { html: string };
    const panel = vscode.window.createWebviewPanel("editspecTrace", "EditSpec: Speculation", vscode.ViewColumn.Beside, {
      enableScripts: true,
    });
    panel.webview.html = result.html;
  } catch (e) {
    vscode.window.showErrorMessage(`EditSpec: ${(e as Error).message}`);
  }
}

/** Cancel the rewrite of the active document, or every running rewrite when it has none. */
function cancelRewrite(): void {
  const active = running.get(vscode.window.activeTextEditor?.document.uri.toString() ?? "");
  for (const state of active ? [active] : [...running.values()]) state.cancel();
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  context.subscriptions.push(
    vscode.commands.registerCommand("editspec.rewriteFunction", () => rewrite(context)),
    vscode.commands.registerCommand("editspec.cancelRewrite", cancelRewrite),
    vscode.commands.registerCommand("editspec.showSpeculation", showSpeculation),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (!e.affectsConfiguration("editspec")) return;
      if (client?.isRunning() && !SERVER_PROCESS_SETTINGS.some((name) => e.affectsConfiguration(name))) {
        // The running server takes them as they are: it loads the model again only when the model's own settings
        // change, and keeps the prompts it has read otherwise.
        const settings = { editspec: serverSettings(readSettings()) };
        await client.sendNotification(DidChangeConfigurationNotification.type, { settings });
        return;
      }
      await client?.stop();
      await startClient(context);
    }),
  );
  await startClient(context);
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  client = createClient(context);
  await client.start();
  client.onRequest(ApplyWorkspaceEditRequest.type, applyEdit);
}

export async function deactivate(): Promise<void> {
  await client?.stop();
  client = undefined;
}
