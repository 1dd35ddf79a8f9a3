// The extension's logic that needs no `vscode` module: unit-tested with plain `node --test`.

export interface EditSpecSettings {
  serverCommand: string[];
  python: string;
  model: string;
  draftModel: string;
  threads: number | null;
  gpuLayers: number | null;
  temperature: number;
  maxTokens: number | null;
  streaming: "edits" | "final";
  presets: string[];
  readAhead: boolean;
  secondLook: boolean;
  preload: boolean;
  contextTokens: number | null;
  editIntervalMs: number | null;
  prefixCacheMb: number | null;
}

export interface ServerCommand {
  command: string;
  args: string[];
}

/** How to start the server: an explicit command, else `python -m lsp`, else `editspec-lsp` on PATH. */
export function serverCommand(s: Pick<EditSpecSettings, "serverCommand" | "python">): ServerCommand {
  if (s.serverCommand && s.serverCommand.length > 0) {
    return { command: s.serverCommand[0], args: s.serverCommand.slice(1) };
  }
  if (s.python && s.python.trim() !== "") {
    return { command: s.python, args: ["-m", "lsp"] };
  }
  return { command: "editspec-lsp", args: [] };
}

/**
 * Every server setting, for workspace/didChangeConfiguration: an empty one as null, which puts the server's
 * default back (one left out would keep the value it had).
 */
export function serverSettings(s: EditSpecSettings): Record<string, unknown> {
  return {
    temperature: s.temperature,
    streaming: s.streaming,
    presets: s.presets,
    readAhead: s.readAhead,
    secondLook: s.secondLook,
    preload: s.preload,
    maxTokens: s.maxTokens || null,
    model: s.model || null,
    draftModel: s.draftModel || null,
    threads: s.threads || null,
    gpuLayers: s.gpuLayers ?? null,
    contextTokens: s.contextTokens ?? null,
    editIntervalMs: s.editIntervalMs ?? null,
    prefixCacheMb: s.prefixCacheMb ?? null,
  };
}

/** The server's initializationOptions: the settings that are set (an empty one is the server's default). */
export function initializationOptions(s: EditSpecSettings): Record<string, unknown> {
  return Object.fromEntries(Object.entries(serverSettings(s)).filter(([, value]) => value !== null));
}

/** The settings that say how the server is started: changing one starts a new server; the others it takes as is. */
export const SERVER_PROCESS_SETTINGS = ["editspec.serverCommand", "editspec.python"];

/** Recent instructions, newest first, without duplicates, at most `max`. */
export function remember(recent: readonly string[], instruction: string, max = 10): string[] {
  const text = instruction.trim();
  if (!text) return [...recent];
  return [text, ...recent.filter((r) => r !== text)].slice(0, max);
}

export interface RewriteArgs {
  uri: string;
  position: { line: number; character: number };
  instruction?: string;
  workDoneToken?: string;
}

/** Arguments for `editspec.rewrite` from a code action's (possibly partial) arguments. */
export function rewriteArguments(base: RewriteArgs, instruction: string, token: string): RewriteArgs {
  return { uri: base.uri, position: base.position, instruction, workDoneToken: token };
}

/** What a failed rewrite request tells the user: the JSON-RPC layer's words for a lost server made plain. */
export function failureMessage(message: string): string {
  return /connection (got |is )?(disposed|closed)/i.test(message) ? "the language server stopped during the rewrite" : message;
}

/** Where two texts differ, by their common start and end: [start, end in a, end in b]. */
export function changedSpan(a: string, b: string): [number, number, number] {
  let start = 0;
  const shorter = Math.min(a.length, b.length);
  while (start < shorter && a[start] === b[start]) start += 1;
  let end = 0;
  while (end < shorter - start && a[a.length - 1 - end] === b[b.length - 1 - end]) end += 1;
  return [start, a.length - end, b.length - end];
}

/** "lines 3-5" of a text, for its characters [start, end) (1-based; an empty span is the line it is on). */
export function lines(text: string, start: number, end: number): string {
  const first = text.slice(0, start).split("\n").length;
  const last = text.slice(0, Math.max(start, end - 1)).split("\n").length;
  return first === last ? `line ${first}` : `lines ${first}-${last}`;
}

/**
 * The document without a rewrite's edits but with everything else done to it: `base` is that so far (at first the
 * text before the rewrite's first edit), `ours` the text after the rewrite's latest edit, `now` the text as it is.
 * What changed from `ours` to `now` was done by someone else (the user typing elsewhere): it is carried over to
 * `base` when it lies where the rewrite changed nothing. Undefined when it touches what the rewrite changed, even
 * only at its edge (a letter typed right after the rewrite's text): then the two cannot be told apart.
 */
export function withoutRewrite(base: string, ours: string, now: string): string | undefined {
  if (base === ours) return now;
  const [from, , oursEnd] = changedSpan(base, ours); // the rewrite's part of `ours`: [from, oursEnd)
  const [a, b, c] = changedSpan(ours, now); // the other change: ours[a, b) became now[a, c)
  if (b < from) return base.slice(0, a) + now.slice(a, c) + base.slice(b);
  const shift = base.length - ours.length; // after the rewrite's part, base and ours differ by this much in length
  if (a > oursEnd) return base.slice(0, a + shift) + now.slice(a, c) + base.slice(b + shift);
  return undefined;
}
