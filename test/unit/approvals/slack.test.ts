import { describe, expect, it } from 'vitest';
import {
  MAX_ARGS_CHARS,
  MAX_VIOLATION_CHARS,
  slackEscape,
  slackInline,
  slackQuote,
  slackRequestText,
  slackResolvedText,
} from '../../../src/approvals/slack.js';
import type { AccessRequest } from '../../../src/approvals/types.js';

const request: AccessRequest = {
  id: '7d3f6f0e-2b7a-4c55-9a55-2f1c0e9d8b11',
  agentId: 'agent-a',
  agentName: 'A',
  capability: 'send_sms',
  method: 'POST',
  target: '/sms',
  args: { to: '+1' },
  reason: 'asked',
  violations: [{ field: 'to', constraint: 'in', expected: ['+2'], actual: '+1', message: 'to must be one of ["+2"], got "+1"' }],
  absentFields: [],
  headers: [],
  createdAt: 0,
  expiresAt: 60_000,
  codeHash: 'x',
  state: 'pending',
  notified: false,
};

describe('Slack text', () => {
  it('escapes the three entities, & first', () => {
    expect(slackEscape('a & <b> &lt;')).toBe('a &amp; &lt;b&gt; &amp;lt;');
  });

  it('shows control and bidi characters as escapes on one line', () => {
    expect(slackInline('a\nb\u0000c\u202ed\u2066e\u0085')).toBe('a\\u000ab\\u0000c\\u202ed\\u2066e\\u0085');
  });

  it('shows zero-width characters as escapes too (they hide or join text)', () => {
    expect(slackInline('a\u200bb\u200cc\u200dd\u2060e\ufeff')).toBe('a\\u200bb\\u200cc\\u200dd\\u2060e\\ufeff');
  });

  it("keeps the approval code within Slack's 40,000 characters whatever the violations carry", () => {
    const huge = {
      field: 'to',
      constraint: 'in' as const,
      expected: ['+2'],
      actual: 'x'.repeat(50_000),
      message: `to must be one of ["+2"], got "${'x'.repeat(50_000)}"`,
    };
    const text = slackRequestText({ ...request, violations: Array.from({ length: 30 }, () => huge) }, 'CODE234567', {}, []);
    expect(text.length).toBeLessThan(40_000);
    expect(text).toContain('Approval code: `CODE234567`');
    expect(text).toContain(`more characters)`);
    expect(text).toContain('• and 10 more');
    expect(
      text
        .split('\n')
        .filter((l) => l.startsWith('• to must'))
        .every((l) => l.length < MAX_VIOLATION_CHARS + 60),
    ).toBe(true);
  });

  it('quotes every line, whatever the line break', () => {
    expect(slackQuote('one\ntwo\r\nthree\rfour\u2028five\u2029six\n\nseven')).toBe('> one\n> two\n> three\n> four\n> five\n> six\n>\n> seven');
  });

  it('puts agent text only in quotes or escaped inline, and says what it hid or shortened', () => {
    const r = { ...request, agentName: 'A\nViolations: none', target: '/sms?<!channel>', reason: 'fine\nApprove: agents-chain approvals approve x' };
    const long = { to: '+1', body: 'x'.repeat(MAX_ARGS_CHARS) };
    const text = slackRequestText(r, 'CODE234567', long, ['password']);
    const lines = text.split('\n');
    expect(lines[0]).toContain('agent *A\\u000aViolations: none*');
    expect(lines).toContain('Call that runs if approved: POST /sms?&lt;!channel&gt;');
    expect(lines.filter((l) => l.startsWith('Approve:'))).toEqual([`Approve: agents-chain approvals approve ${r.id} --code CODE234567 [--scope value]`]);
    expect(lines).toContain('> Approve: agents-chain approvals approve x');
    expect(text).toMatch(/Arguments shortened here: \d+ more characters/);
    expect(text).toContain('Hidden here as secrets (the approved call sends their real values): password');
  });

  it("resolution text quotes the reviewer's reason", () => {
    expect(slackResolvedText({ ...request, state: 'denied', denyReason: 'no\n<!here>' })).toBe(
      `Access request \`${request.id}\` (agent-a → send_sms) was denied. Reviewer's reason:\n> no\n> &lt;!here&gt;`,
    );
  });
});
