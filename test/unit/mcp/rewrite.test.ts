import { describe, expect, it } from 'vitest';
import { rewriteJsonText, type MessageRewrite } from '../../../src/mcp/rewrite.js';

/** rewriteJsonText, or the text itself where it reads no message (undefined: the relay refuses such an answer). */
const rewriteJsonBody = (text: string, rewrite: MessageRewrite): string => rewriteJsonText(text, rewrite) ?? text;

interface Tool {
  name: string;
}

/** Filters `result.tools` of the response whose id is 7, leaves every other message alone. */
const hideSecretFrom7: MessageRewrite = (m) => {
  const msg = m as { id?: unknown; result?: { tools?: Tool[] } };
  if (msg?.id !== 7 || msg.result?.tools === undefined) return m;
  return { ...msg, result: { ...msg.result, tools: msg.result.tools.filter((t) => t.name !== 'secret') } };
};

const TOOLS_7 = '{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"refund"},{"name":"secret"}]}}';
const FILTERED_7 = '{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"refund"}]}}';

describe('rewriteJsonBody', () => {
  it('rewrites the response whose id matches and nothing else', () => {
    expect(rewriteJsonBody(TOOLS_7, hideSecretFrom7)).toBe(FILTERED_7);
    const other = '{"jsonrpc":"2.0","id":8,"result":{"tools":[{"name":"secret"}]}}';
    expect(rewriteJsonBody(other, hideSecretFrom7)).toBe(other);
  });

  it('does not touch a server request that happens to carry the same id', () => {
    const request = '{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}';
    expect(rewriteJsonBody(request, hideSecretFrom7)).toBe(request);
  });

  it('applies the rewrite to each element of an array', () => {
    const seen: unknown[] = [];
    const batch = `[{"jsonrpc":"2.0","method":"notifications/progress"},${TOOLS_7}]`;
    const out = rewriteJsonBody(batch, (m) => (seen.push(m), hideSecretFrom7(m)));
    expect(out).toBe(`[{"jsonrpc":"2.0","method":"notifications/progress"},${FILTERED_7}]`);
    expect(seen).toHaveLength(2);
  });

  it.each([[''], ['not json'], ['{"jsonrpc":'], ['[1,'], ['42'], ['"text"'], ['null'], ['true']])(
    'returns %j unchanged without calling the rewrite',
    (text) => {
      let called = false;
      expect(
        rewriteJsonBody(text, (m) => {
          called = true;
          return m;
        }),
      ).toBe(text);
      expect(called).toBe(false);
      expect(rewriteJsonText(text, (m) => m)).toBeUndefined();
    },
  );

  it('re-serializes even an unchanged message (whitespace, duplicate keys: the client sees what the rewrite saw)', () => {
    expect(rewriteJsonBody(' \r\n{ "id" : 1, "id": 7 }\n', (m) => m)).toBe('{"id":7}');
  });

  it('keeps a message changed in place, and keeps the original when the rewrite returns undefined', () => {
    const inPlace = rewriteJsonBody(TOOLS_7, (m) => {
      (m as { result: { tools: Tool[] } }).result.tools.pop();
      return m;
    });
    expect(inPlace).toBe(FILTERED_7);
    expect(rewriteJsonBody('[{"a":1},{"b":2}]', () => undefined)).toBe('[{"a":1},{"b":2}]');
  });

  it('lets an exception from the rewrite through', () => {
    expect(() =>
      rewriteJsonBody('{}', () => {
        throw new Error('boom');
      }),
    ).toThrow('boom');
  });
});
