import type { Document, LineCounter } from 'yaml';
import { isMap, isNode, isPair, isScalar } from 'yaml';

/** One problem in a policy file, located for an operator's editor. */
export interface PolicyIssue {
  file: string;
  line: number;
  column: number;
  /** Dotted location, e.g. "grants[0].constraints.amount". */
  key: string;
  message: string;
}

export class PolicyError extends Error {
  constructor(readonly issues: PolicyIssue[]) {
    super(issues.map(formatIssue).join('\n'));
    this.name = 'PolicyError';
  }
}

export function formatIssue(i: PolicyIssue): string {
  return `${i.file}:${i.line}:${i.column}: ${i.key ? `${i.key}: ` : ''}${i.message}`;
}

export type PathPart = string | number;

export function keyOf(path: readonly PathPart[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? p : `.${p}`;
  return out;
}

/**
 * Finds where a value (or, with `asKey`, the key naming it) sits in the YAML
 * source. Falls back to the nearest ancestor that exists.
 */
export function locate(doc: Document, lines: LineCounter, path: readonly PathPart[], asKey = false): { line: number; column: number } {
  let node: unknown = doc.contents;
  let best: [number, number, number] | undefined = rangeOf(node);
  for (let i = 0; i < path.length; i++) {
    const part = path[i]!;
    if (!isNode(node) || !('items' in node)) break;
    const items = (node as { items: unknown[] }).items;
    let next: unknown;
    if (isMap(node)) {
      const pair = items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(part));
      if (!isPair(pair)) break;
      const last = i === path.length - 1;
      if (last && asKey) {
        best = rangeOf(pair.key) ?? best;
        break;
      }
      next = pair.value ?? pair.key;
      if (pair.value === null) best = rangeOf(pair.key) ?? best;
    } else {
      next = typeof part === 'number' ? items[part] : undefined;
    }
    if (next === undefined) break;
    node = next;
    best = rangeOf(node) ?? best;
  }
  const pos = lines.linePos(best ? best[0] : 0);
  return { line: pos.line, column: pos.col };
}

function rangeOf(n: unknown): [number, number, number] | undefined {
  return isNode(n) || isPair(n) ? ((n as { range?: [number, number, number] }).range ?? undefined) : undefined;
}
