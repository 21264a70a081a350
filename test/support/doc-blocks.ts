/**
 * Runs the command blocks of a Markdown page, in order, as a reader would type them into one shell.
 *
 * Which blocks run, and how, is said in the page itself by an HTML comment on the line right before a
 * fenced block (GitHub does not render these comments):
 *
 *   ```sh / ```bash / ```shell      runs; must exit 0
 *   <!-- run: exit N -->            runs; must exit N
 *   <!-- run: background, ready when: "TEXT" -->
 *                                   starts in the background (like a second terminal); the next block
 *                                   runs once TEXT appears in its output
 *   <!-- not run: REASON -->        does not run (a cluster, a global install, the suite itself)
 *   <!-- write: PATH -->            (any language) the block's text is saved as PATH, as the page asks
 *   <!-- output -->                 (any language) every line must appear in the output of the block
 *                                   run before it; `...` in a line stands for anything
 *   <!-- run: stop -->              (on its own line) Ctrl-C for the newest background block; waits for it
 *
 * Every block runs in `bash` with `set -eo pipefail`; the working directory and the exported variables
 * carry over from one block to the next (a `cd` or an `export` in one block holds for the following ones).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

export type Step =
  | { kind: 'run'; line: number; code: string; exit: number; expect: string[] | undefined }
  | { kind: 'background'; line: number; code: string; readyWhen: string }
  | { kind: 'skip'; line: number; code: string; reason: string }
  | { kind: 'write'; line: number; path: string; content: string }
  | { kind: 'stop'; line: number };

const SHELL_LANGS = new Set(['sh', 'bash', 'shell']);
const MARKER = /^<!--\s*(.*?)\s*-->$/;

/** One directive from a marker's text, or undefined for an ordinary comment. */
function directive(text: string): string | undefined {
  return /^(not run|run|write|output)\b/.test(text) ? text : undefined;
}

/** The steps of a page, in order. Throws on a marker it does not understand (a typo must not skip a block). */
export function docSteps(markdown: string, file = 'page'): Step[] {
  const lines = markdown.split('\n');
  const steps: Step[] = [];
  let pending: { text: string; line: number } | undefined;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    const trimmed = raw.trim();
    const marker = MARKER.exec(trimmed);
    const text = marker ? directive(marker[1]!) : undefined;
    if (text !== undefined) {
      if (pending) throw new Error(`${file}:${pending.line}: marker "${pending.text}" is not followed by a block`);
      if (text === 'run: stop') steps.push({ kind: 'stop', line: i + 1 });
      else pending = { text, line: i + 1 };
      continue;
    }
    const fence = /^(\s*)(`{3,}|~{3,})\s*([\w+-]*)/.exec(raw);
    if (!fence) {
      if (pending) throw new Error(`${file}:${pending.line}: marker "${pending.text}" must be on the line right before a fenced block`);
      continue;
    }
    const [, indent, ticks, lang] = fence as unknown as [string, string, string, string];
    const start = i + 1;
    const body: string[] = [];
    for (i++; i < lines.length; i++) {
      const l = lines[i]!;
      if (l.trim().startsWith(ticks[0]!.repeat(ticks.length)) && l.trim().replace(/[`~]/g, '') === '') break;
      body.push(l.startsWith(indent) ? l.slice(indent.length) : l);
    }
    if (i >= lines.length) throw new Error(`${file}:${start}: unclosed fenced block`);
    const content = body.join('\n');
    const m = pending;
    pending = undefined;
    const shell = SHELL_LANGS.has(lang.toLowerCase());
    if (!m) {
      if (shell) steps.push({ kind: 'run', line: start, code: content, exit: 0, expect: undefined });
      continue;
    }
    let parts: RegExpExecArray | null;
    if (m.text === 'output') {
      const prev = steps[steps.length - 1];
      if (prev?.kind !== 'run') throw new Error(`${file}:${m.line}: an output block must follow a block that runs`);
      prev.expect = body.map((l) => l.trimEnd()).filter((l) => l.trim() !== '');
    } else if ((parts = /^write:\s*(\S+)$/.exec(m.text))) {
      steps.push({ kind: 'write', line: start, path: parts[1]!, content: `${content}\n` });
    } else if ((parts = /^not run:\s*(.+)$/.exec(m.text))) {
      steps.push({ kind: 'skip', line: start, code: content, reason: parts[1]! });
    } else if (!shell) {
      throw new Error(`${file}:${m.line}: "${m.text}" before a ${lang || 'plain'} block (only write/output markers go there)`);
    } else if ((parts = /^run:\s*background,\s*ready when:\s*"([^"]+)"$/.exec(m.text))) {
      steps.push({ kind: 'background', line: start, code: content, readyWhen: parts[1]! });
    } else if ((parts = /^run:\s*exit\s+(\d+)$/.exec(m.text))) {
      steps.push({ kind: 'run', line: start, code: content, exit: Number(parts[1]), expect: undefined });
    } else {
      throw new Error(`${file}:${m.line}: unknown marker "${m.text}"`);
    }
  }
  if (pending) throw new Error(`${file}:${pending.line}: marker "${pending.text}" is not followed by a block`);
  return steps;
}

/** Whether `output` holds every expected line; `...` in an expected line matches anything (within one line). */
export function missingLines(expected: string[], output: string): string[] {
  const lines = output.split('\n');
  return expected.filter((want) => {
    const pieces = want
      .trim()
      .split('...')
      .filter((p) => p !== '');
    return !lines.some((line) => {
      let at = 0;
      for (const p of pieces) {
        const found = line.indexOf(p, at);
        if (found < 0) return false;
        at = found + p.length;
      }
      return true;
    });
  });
}

export interface Result {
  code: number | null;
  output: string;
}

interface Background {
  child: ChildProcess;
  line: number;
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * One reader's shell session: a working directory and exported variables carried from block to block
 * (kept in `stateDir`), and the background processes its blocks started.
 */
export class DocSession {
  private readonly background: Background[] = [];
  private readonly envFile: string;
  private readonly cwdFile: string;

  constructor(
    stateDir: string,
    cwd: string,
    private readonly env: NodeJS.ProcessEnv,
    private readonly rewrite: (text: string) => string = (t) => t,
  ) {
    mkdirSync(stateDir, { recursive: true });
    this.envFile = join(stateDir, 'env.sh');
    this.cwdFile = join(stateDir, 'cwd');
    writeFileSync(this.envFile, '');
    writeFileSync(this.cwdFile, cwd);
  }

  /** A block with the session's state before it; a foreground block saves the state it leaves behind. */
  private script(code: string, foreground: boolean): string {
    const save = `export -p > ${JSON.stringify(this.envFile)}; pwd > ${JSON.stringify(this.cwdFile)}`;
    return [
      `source ${JSON.stringify(this.envFile)}`,
      `cd "$(cat ${JSON.stringify(this.cwdFile)})"`,
      ...(foreground ? [`trap ${shellQuote(save)} EXIT`] : []),
      'set -eo pipefail',
      this.rewrite(code),
    ].join('\n');
  }

  private spawnBash(code: string, foreground: boolean): ChildProcess {
    // Its own process group, so that stopping a block stops what it started (make, then node).
    return spawn('bash', ['-c', this.script(code, foreground)], { env: this.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  }

  /** Runs a block to completion (killed after `timeoutMs`). */
  run(code: string, timeoutMs = 30_000): Promise<Result> {
    return new Promise((resolvePromise, reject) => {
      const child = this.spawnBash(code, true);
      let output = '';
      child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
      const timer = setTimeout(() => killGroup(child, 'SIGKILL'), timeoutMs);
      child.on('error', reject);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolvePromise({ code, output });
      });
    });
  }

  /** Saves a block's text as `path`, relative to the session's working directory. */
  write(path: string, content: string): void {
    const target = resolve(readFileSync(this.cwdFile, 'utf8').trim(), path);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, this.rewrite(content));
  }

  /** Starts a block in the background; resolves once `readyWhen` appears in its output. */
  start(code: string, readyWhen: string, line: number, timeoutMs = 30_000): Promise<void> {
    const child = this.spawnBash(code, false);
    let output = '';
    const exited = new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    const bg: Background = { child, line, output: () => output, exited };
    this.background.push(bg);
    const want = this.rewrite(readyWhen);
    return new Promise((resolvePromise, reject) => {
      const timer = setTimeout(() => reject(new Error(`block at line ${line}: "${want}" did not appear within ${timeoutMs} ms:\n${output}`)), timeoutMs);
      const onData = (d: Buffer): void => {
        output += d.toString();
        if (output.includes(want)) {
          clearTimeout(timer);
          resolvePromise();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      void exited.then((c) => {
        clearTimeout(timer);
        reject(new Error(`block at line ${line} exited (${c}) before "${want}" appeared:\n${output}`));
      });
    });
  }

  /** Ctrl-C for the newest background block that still runs; resolves with its output once it has exited. */
  async stop(): Promise<string> {
    const bg = [...this.background].reverse().find((b) => b.child.exitCode === null && b.child.signalCode === null);
    if (!bg) throw new Error('"run: stop" with no background block running');
    killGroup(bg.child, 'SIGINT');
    await bg.exited;
    return bg.output();
  }

  /** Stops every background block still running (Ctrl-C, then SIGKILL after 5 s). */
  async close(): Promise<void> {
    await Promise.all(
      this.background.map(async (b) => {
        if (b.child.exitCode !== null || b.child.signalCode !== null) return;
        killGroup(b.child, 'SIGINT');
        const timer = setTimeout(() => killGroup(b.child, 'SIGKILL'), 5_000);
        await b.exited;
        clearTimeout(timer);
      }),
    );
  }
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // already gone
  }
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
export function headingSlug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors a page's headings make (duplicates get -1, -2, ... as on GitHub). */
export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  let fence: string | undefined;
  for (const line of markdown.split('\n')) {
    const f = /^\s*(`{3,}|~{3,})/.exec(line);
    if (f) {
      if (fence === undefined) fence = f[1]!;
      else if (line.trim().startsWith(fence) && line.trim().replace(/[`~]/g, '') === '') fence = undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const base = headingSlug(h[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** The relative links of a page (outside code), with their line numbers. */
export function relativeLinks(markdown: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  let fence: string | undefined;
  markdown.split('\n').forEach((line, i) => {
    const f = /^\s*(`{3,}|~{3,})/.exec(line);
    if (f) {
      if (fence === undefined) fence = f[1]!;
      else if (line.trim().startsWith(fence) && line.trim().replace(/[`~]/g, '') === '') fence = undefined;
      return;
    }
    if (fence !== undefined) return;
    const text = line.replace(/`[^`]*`/g, '');
    for (const m of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      links.push({ line: i + 1, target });
    }
  });
  return links;
}
