import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import type { MessageRewrite } from '../../../src/mcp/rewrite.js';
import { MAX_SSE_EVENT_BYTES, sseRewriter } from '../../../src/mcp/sse.js';
import type { SseRewriterOptions } from '../../../src/mcp/sse.js';

interface Tool {
  name: string;
}

/** Filters `result.tools` of the response whose id is 7, leaves every other message alone. */
const hideSecretFrom7: MessageRewrite = (m) => {
  const msg = m as { id?: unknown; result?: { tools?: Tool[] } };
  if (msg?.id !== 7 || msg.result?.tools === undefined) return m;
  return { ...msg, result: { ...msg.result, tools: msg.result.tools.filter((t) => t.name !== 'secret') } };
};
const identity: MessageRewrite = (m) => m;

/** Pipes `chunks` through a rewriter and returns everything it wrote. */
async function run(chunks: Buffer[], rewrite: MessageRewrite = hideSecretFrom7, options?: SseRewriterOptions): Promise<Buffer> {
  const out: Buffer[] = [];
  await pipeline(Readable.from(chunks, { objectMode: false }), sseRewriter(rewrite, options), async (source: AsyncIterable<Buffer>) => {
    for await (const c of source) out.push(c);
  });
  return Buffer.concat(out);
}
const text = async (input: string, rewrite?: MessageRewrite, options?: SseRewriterOptions): Promise<string> =>
  (await run([Buffer.from(input)], rewrite, options)).toString('utf8');

/** LF, CRLF and CR lines; comments, retry, a priming event, a server request with id 7, multi-line and non-JSON data,
 * multi-byte characters, and a trailing event cut off by the end of the stream. */
const SAMPLE = [
  ': keepalive comment\n',
  'retry: 3000\n',
  'id: prime-1\n',
  'data:\n',
  '\n',
  'event: message\n',
  'id: 1\n',
  'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"note":"café ☕ 😀"}}\n',
  '\n',
  'id: 2\r\n',
  'data: {"jsonrpc":"2.0","id":7,"method":"sampling/createMessage",\r\n',
  'data:  "params":{}}\r\n',
  '\r\n',
  ': before the response\r',
  'id: 3\r',
  'data: [DONE]\r',
  '\r',
  'event: message\n',
  'id: 4\n',
  'data: {"jsonrpc":"2.0","id":7,\n',
  'data: "result":{"tools":[{"name":"refund","description":"Réembourser 💶"},{"name":"secret"}]}}\n',
  ': a comment after the data\n',
  '\n',
  '\n',
  'data: {"jsonrpc":"2.0","id":8,"result":{}}\n',
].join('');

const EXPECTED = [
  ': keepalive comment\n',
  'retry: 3000\n',
  'id: prime-1\n',
  'data:\n',
  '\n',
  'event: message\n',
  'id: 1\n',
  'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"note":"café ☕ 😀"}}\n',
  '\n',
  'id: 2\r\n',
  'data: {"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}\r\n',
  '\r\n',
  ': before the response\r',
  'id: 3\r',
  'data: [DONE]\r',
  '\r',
  'event: message\n',
  'id: 4\n',
  'data: {"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"refund","description":"Réembourser 💶"}]}}\n',
  ': a comment after the data\n',
  '\n',
  '\n',
  'data: {"jsonrpc":"2.0","id":8,"result":{}}\n',
].join('');

/** A small deterministic PRNG (mulberry32), so a failing split can be replayed. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('sseRewriter: the sample stream', () => {
  const bytes = Buffer.from(SAMPLE);

  it('rewrites the id-7 response only, keeps every other line and terminator', async () => {
    expect((await run([bytes])).toString('utf8')).toBe(EXPECTED);
  });

  it('gives the same output for a split at every byte offset (inside CRLF and multi-byte characters too)', async () => {
    for (let i = 0; i <= bytes.length; i++) {
      const out = await run([bytes.subarray(0, i), bytes.subarray(i)]);
      expect(out.toString('utf8'), `split at ${i}`).toBe(EXPECTED);
    }
  });

  it('gives the same output one byte at a time and for random multi-way splits', async () => {
    expect((await run([...bytes].map((b) => Buffer.from([b])))).toString('utf8')).toBe(EXPECTED);
    const random = prng(18);
    for (let round = 0; round < 200; round++) {
      const chunks: Buffer[] = [];
      for (let at = 0; at < bytes.length;) {
        const n = 1 + Math.floor(random() * 40);
        chunks.push(bytes.subarray(at, at + n));
        at += n;
      }
      expect((await run(chunks)).toString('utf8'), `round ${round}`).toBe(EXPECTED);
    }
  });
});

describe('sseRewriter: lines and fields', () => {
  it('joins multi-line data with "\\n" (a bare `data` line is an empty one) and writes one data line back', async () => {
    expect(await text('data: {"a":\ndata\ndata:  [1,\ndata:2]}\n\n', identity)).toBe('data: {"a":[1,2]}\n\n');
  });

  it('keeps CRLF and CR terminators, and the field lines around the data where they were', async () => {
    const input = ': c\r\nevent: message\r\ndata: { "id" : 1 }\r\nid: 9\r\nretry: 10\r\n\r\n';
    expect(await text(input, identity)).toBe(': c\r\nevent: message\r\ndata: {"id":1}\r\nid: 9\r\nretry: 10\r\n\r\n');
    expect(await text('data:{"id":1}\rx-unknown: y\r\r', identity)).toBe('data: {"id":1}\rx-unknown: y\r\r');
  });

  it('never lets a bare "\\r" left next to a blank "\\n" line (once data lines are dropped) swallow the blank line', async () => {
    expect(await text('data: [\rdata: 1]\r\n\n', identity)).toBe('data: [1]\r\n\n');
    expect(await text('data: {"id":1,\rid: 1\rdata: "x":2}\n\ndata: {"id":3}\n\n', identity)).toBe('data: {"id":1,"x":2}\rid: 1\r\n\ndata: {"id":3}\n\n');
    // Lines that were already next to each other keep their bytes.
    expect(await text('data: [1]\r\n', identity)).toBe('data: [1]\r\n');
  });

  it('passes an event out as soon as its blank line is seen, even when a "\\r\\n" is split after the "\\r"', async () => {
    const rewriter = sseRewriter(identity);
    const out: string[] = [];
    rewriter.on('data', (c: Buffer) => out.push(c.toString('utf8')));
    rewriter.write(Buffer.from('data: {"id":1}\r\n\r'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(out.join('')).toBe('data: {"id":1}\r\n\r');
    rewriter.end(Buffer.from('\ndata: {"id":2}\r\n\r\n'));
    await new Promise((resolve) => rewriter.on('end', resolve));
    expect(out.join('')).toBe('data: {"id":1}\r\n\r\ndata: {"id":2}\r\n\r\n');
  });

  it('still joins a "\\r\\n" split by an empty chunk', async () => {
    // Read as "\r" then a blank "\n", the event would end after "[1," and neither half would be JSON.
    // Written directly: a non-object-mode Readable drops empty chunks, write() does not.
    const rewriter = sseRewriter(identity);
    const out: Buffer[] = [];
    rewriter.on('data', (c: Buffer) => out.push(c));
    for (const c of ['data: [1,\r', '', '\ndata: 2]\n\n']) rewriter.write(Buffer.from(c));
    rewriter.end();
    await new Promise((resolve) => rewriter.on('end', resolve));
    expect(Buffer.concat(out).toString('utf8')).toBe('data: [1,2]\r\n\n');
  });

  it('keeps comment-only events, retry and blank lines as sent', async () => {
    const input = ':\n\n: ping\n\nretry: 5000\n\n\n\n';
    expect(await text(input)).toBe(input);
  });

  it('strips a leading BOM (and its Latin-1 mojibake, which the MCP SDK strips too) so the first line is read as data', async () => {
    expect(await text('\ufeffdata: {"id":1}\n\n', identity)).toBe('data: {"id":1}\n\n');
    expect(await text('\u00ef\u00bb\u00bfdata: {"id":1}\n\n', identity)).toBe('data: {"id":1}\n\n');
    expect(await text('data: {"id":1}\n\n\ufeffdata: {"id":2}\n\n', identity)).toBe('data: {"id":1}\n\n\ufeffdata: {"id":2}\n\n');
  });
});

describe('sseRewriter: data that is not a JSON message', () => {
  it.each([
    ['data: hello\n\n'],
    ['data: [DONE]\n\n'],
    ['data: 42\n\n'],
    ['data: "text"\n\n'],
    ['data: {"broken":\ndata: \n\n'],
    ['Data: {"id":7}\n\n'],
    ['data : {"id":7}\n\n'],
    ['id: 1\nevent: endpoint\n\n'],
  ])('passes %j unchanged without calling the rewrite', async (input) => {
    let called = false;
    const out = await text(input, (m) => {
      called = true;
      return m;
    });
    expect(out).toBe(input);
    expect(called).toBe(false);
  });

  it('passes invalid UTF-8 in non-JSON data through byte for byte', async () => {
    const input = Buffer.from([...Buffer.from('data: '), 0xff, 0xc3, 0x0a, 0x0a]);
    expect(await run([input])).toEqual(input);
  });

  it('flushes a trailing partial event as-is (an SSE client never dispatches it)', async () => {
    expect(await text('data: {"id":7,"result":{"tools":[{"name":"secret"}]}}\n')).toBe('data: {"id":7,"result":{"tools":[{"name":"secret"}]}}\n');
    expect(await text('data: {"id":1}\n\nid: 2\ndata: {"id":')).toBe('data: {"id":1}\n\nid: 2\ndata: {"id":');
  });
});

describe('sseRewriter: arrays, ids and errors', () => {
  it('rewrites each element of array data', async () => {
    const input = 'data: [{"id":6,"result":{"tools":[{"name":"secret"}]}},{"id":7,"result":{"tools":[{"name":"secret"},{"name":"a"}]}}]\n\n';
    expect(await text(input)).toBe('data: [{"id":6,"result":{"tools":[{"name":"secret"}]}},{"id":7,"result":{"tools":[{"name":"a"}]}}]\n\n');
  });

  it('changes only the response whose id equals 7', async () => {
    const tools = '"result":{"tools":[{"name":"refund"},{"name":"secret"}]}';
    const input = `data: {"id":"7",${tools}}\n\ndata: {"id":6,${tools}}\n\ndata: {"id":7,${tools}}\n\n`;
    const out = await text(input);
    expect(out).toBe(`data: {"id":"7",${tools}}\n\ndata: {"id":6,${tools}}\n\ndata: {"id":7,"result":{"tools":[{"name":"refund"}]}}\n\n`);
  });

  it('errors on an event larger than the bound, and accepts one exactly at it', async () => {
    const event = 'data: {"id":1}\n\n';
    expect(await text(event + event, identity, { maxEventBytes: event.length })).toBe(event + event);
    await expect(text(event, identity, { maxEventBytes: event.length - 1 })).rejects.toThrow(`SSE event larger than ${event.length - 1} bytes`);
    const chunks = [Buffer.from('data: {"id":1,"x":"'), Buffer.alloc(MAX_SSE_EVENT_BYTES, 'a'), Buffer.from('"}\n\n')];
    await expect(run(chunks)).rejects.toThrow(`SSE event larger than ${MAX_SSE_EVENT_BYTES} bytes`);
  });

  it('bounds one event, not the stream', async () => {
    const event = Buffer.from(`data: {"x":"${'a'.repeat(1000)}"}\n\n`);
    const chunks = Array.from({ length: 50 }, () => event);
    const out = await run(chunks, identity, { maxEventBytes: 2 * event.length });
    expect(out).toEqual(Buffer.concat(chunks));
  });

  it('errors the stream when the rewrite throws', async () => {
    const boom: MessageRewrite = () => {
      throw new Error('boom');
    };
    await expect(text('data: {"id":1}\n\n', boom)).rejects.toThrow('boom');
  });
});
