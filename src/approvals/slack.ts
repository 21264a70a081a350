import type { AccessRequest } from './types.js';

/**
 * Slack message text for access requests. Much of it is the agent's own text
 * (reason, argument values, the path it asked for), so nothing of it may read
 * as the sidecar's: `&`, `<`, `>` are escaped as Slack requires (no
 * `<!channel>`, no `<url|label>` links), control and bidi characters are shown
 * as `\uXXXX`, and multi-line agent text sits in a quote, every line prefixed
 * with "> ", so a reason can never forge a "Violations: none" line.
 */

/** Longest argument JSON shown; the rest is announced, never silently dropped. */
export const MAX_ARGS_CHARS = 3000;

/** Slack's three entities (https://api.slack.com/reference/surfaces/formatting#escaping). */
export function slackEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

// C0 and C1 controls, DEL, line/paragraph separators, the bidi embeddings/overrides/isolates (Trojan Source),
// and the zero-width characters that hide or join text (ZWSP, ZWNJ, ZWJ, word joiner, BOM).
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u200b-\u200d\u2060\ufeff]/g;

/** Longest violation line shown (its actual value is the agent's): Slack cuts a message at 40,000 characters, which must never take the approval code with it. */
export const MAX_VIOLATION_CHARS = 300;

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}… (${text.length - max} more characters)` : text;
}

function visible(text: string): string {
  return text.replace(INVISIBLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Agent text on one line: escaped, every control character (newlines included) shown as an escape. */
export function slackInline(text: string): string {
  return slackEscape(visible(text));
}

/** Agent text as a Slack quote: each line (any line break) prefixed with "> ", so it stays inside the quote. */
export function slackQuote(text: string): string {
  return text
    .split(/\r\n|[\n\r\u000b\u000c\u0085\u2028\u2029]/)
    .map((line) => {
      const shown = slackInline(line);
      return shown ? `> ${shown}` : '>';
    })
    .join('\n');
}

export function slackRequestText(r: AccessRequest, code: string, shownArgs: unknown, redacted: readonly string[]): string {
  const json = JSON.stringify(shownArgs, null, 2) ?? 'null';
  const cut = json.length > MAX_ARGS_CHARS;
  const lines = [
    `*Access request* \`${r.id}\`: agent *${slackInline(r.agentName)}* (${slackInline(r.agentId)}) asks to call *${slackInline(r.capability)}* outside its limits.`,
    `Call that runs if approved: ${slackInline(r.method)} ${slackInline(r.target)}`,
    'Violations (checked by the sidecar):',
    ...r.violations.slice(0, 20).map((v) => `• ${slackInline(clip(v.message, MAX_VIOLATION_CHARS))}`),
    ...(r.violations.length > 20 ? [`• and ${r.violations.length - 20} more (GET /approvals/${r.id} on the admin listener)`] : []),
    'Arguments:',
    slackQuote(cut ? json.slice(0, MAX_ARGS_CHARS) : json),
  ];
  if (cut)
    lines.push(`Arguments shortened here: ${json.length - MAX_ARGS_CHARS} more characters; the whole call: GET /approvals/${r.id} on the admin listener.`);
  if (redacted.length) {
    lines.push(`Hidden here as secrets (the approved call sends their real values): ${redacted.map(slackInline).join(', ')}`);
  }
  lines.push(
    'Reason given by the agent (its own words):',
    slackQuote(r.reason),
    `Approval code: \`${code}\` (expires ${new Date(r.expiresAt).toISOString()})`,
    `Approve: agents-chain approvals approve ${r.id} --code ${code} [--scope value]`,
  );
  return lines.join('\n');
}

export function slackResolvedText(r: AccessRequest): string {
  const head = `Access request \`${r.id}\` (${slackInline(r.agentId)} → ${slackInline(r.capability)}) was ${r.state}.`;
  return r.denyReason ? `${head} Reviewer's reason:\n${slackQuote(r.denyReason)}` : head;
}
