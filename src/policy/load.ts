import { readFile } from 'node:fs/promises';
import { LineCounter, parseDocument } from 'yaml';
import { compile, type RawPolicy } from './compile.js';
import { PolicyError, keyOf, locate, type PathPart, type PolicyIssue } from './issues.js';
import { validateAgainstSchema } from './schema.js';
import type { Policy } from './types.js';

export async function loadPolicyFile(file: string): Promise<Policy> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (err) {
    throw new PolicyError([{ file, line: 1, column: 1, key: '', message: `cannot read policy: ${(err as Error).message}` }]);
  }
  return loadPolicyText(bytes.toString('utf8'), file);
}

/** Parses, validates and compiles a policy; throws PolicyError listing every problem. */
export async function loadPolicyText(text: string, file = '<policy>'): Promise<Policy> {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: true });
  const issues: PolicyIssue[] = [];
  const at = (path: PathPart[], message: string, asKey = false): void => {
    issues.push({ file, ...locate(doc, lines, path, asKey), key: keyOf(path), message });
  };

  for (const e of doc.errors) {
    const pos = e.linePos?.[0] ?? { line: 1, col: 1 };
    issues.push({ file, line: pos.line, column: pos.col, key: '', message: e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '') });
  }
  if (issues.length) throw new PolicyError(issues);

  const raw = doc.toJS({ maxAliasCount: 100 }) as unknown;
  for (const p of validateAgainstSchema(raw)) at(p.path, p.message, p.asKey);
  if (issues.length) throw new PolicyError(sorted(issues));

  const policy = await compile(raw as RawPolicy, file, text, at);
  if (issues.length) throw new PolicyError(sorted(issues));
  return policy;
}

function sorted(list: PolicyIssue[]): PolicyIssue[] {
  return [...list].sort((a, b) => a.line - b.line || a.column - b.column);
}
