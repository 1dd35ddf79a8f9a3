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
