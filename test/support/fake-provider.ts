import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ProviderRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

/** A small stand-in for the OpenAI and Anthropic APIs on loopback: records requests, answers in their shapes. */
export interface FakeProvider {
  url: string;
  requests: ProviderRequest[];
  /** Resolved when the streaming answer has sent its last event. */
  streamEnded?: Promise<number>;
  close(): Promise<void>;
}

const json = (res: ServerResponse, status: number, body: unknown): void => {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};

function sse(res: ServerResponse, events: [string, unknown][], pauseAfter: number, pauseMs: number): Promise<number> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  return new Promise((resolve) => {
    let i = 0;
    const next = (): void => {
      if (i === events.length) {
        res.end();
        return resolve(Date.now());
      }
      const [event, data] = events[i++]!;
      res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      setTimeout(next, i === pauseAfter ? pauseMs : 1);
    };
    next();
  });
}

export async function startFakeProvider(): Promise<FakeProvider> {
  const p: FakeProvider = { url: '', requests: [], close: async () => {} };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: ProviderRequest = { method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks) };
      p.requests.push(r);
      const path = r.url.split('?')[0];
      const body = r.body.length && /json/.test(String(req.headers['content-type'])) ? (JSON.parse(r.body.toString()) as Record<string, unknown>) : {};
      const now = Math.floor(Date.now() / 1000);
      switch (path) {
        case '/v1/chat/completions':
          return json(res, 200, {
            id: 'chatcmpl-1',
            object: 'chat.completion',
            created: now,
            model: body.model,
            choices: [{ index: 0, message: { role: 'assistant', content: 'The water cycle, briefly.' }, finish_reason: 'stop', logprobs: null }],
            usage: { prompt_tokens: 9, completion_tokens: 5, total_tokens: 14 },
          });
        case '/v1/embeddings': {
          // The SDK asks for base64 (float32 little-endian) and decodes it.
          const floats = [0.5, 0.25, -1];
          const embedding = body.encoding_format === 'base64' ? Buffer.from(new Float32Array(floats).buffer).toString('base64') : floats;
          return json(res, 200, {
            object: 'list',
            data: [{ object: 'embedding', index: 0, embedding }],
            model: body.model,
            usage: { prompt_tokens: 2, total_tokens: 2 },
          });
        }
        case '/v1/responses':
          return json(res, 200, {
            id: 'resp_1',
            object: 'response',
            created_at: now,
            status: 'completed',
            model: body.model,
            output: [
              {
                type: 'message',
                id: 'msg_1',
                status: 'completed',
                role: 'assistant',
                content: [{ type: 'output_text', text: 'Hello from responses', annotations: [] }],
              },
            ],
            usage: { input_tokens: 3, output_tokens: 3, total_tokens: 6 },
          });
        case '/v1/audio/transcriptions':
          return json(res, 200, { text: 'hello' });
        case '/v1/models':
          return json(res, 200, { object: 'list', data: [{ id: 'gpt-4o-mini', object: 'model', created: now, owned_by: 'fake' }] });
        case '/v1/messages/count_tokens':
          return json(res, 200, { input_tokens: 12 });
        case '/v1/messages': {
          if (body.stream === true) {
            const message = {
              id: 'msg_2',
              type: 'message',
              role: 'assistant',
              model: body.model,
              content: [],
              stop_reason: null,
              stop_sequence: null,
              usage: { input_tokens: 5, output_tokens: 0 },
            };
            p.streamEnded = sse(
              res,
              [
                ['message_start', { type: 'message_start', message }],
                ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
                ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hel' } }],
                ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'lo' } }],
                ['content_block_stop', { type: 'content_block_stop', index: 0 }],
                ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 2 } }],
                ['message_stop', { type: 'message_stop' }],
              ],
              3,
              400,
            ); // a pause after the first text delta: the client must see it before the rest is sent
            return;
          }
          return json(res, 200, {
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            model: body.model,
            content: [{ type: 'text', text: 'positive' }],
            stop_reason: 'end_turn',
            stop_sequence: null,
            usage: { input_tokens: 10, output_tokens: 1 },
          });
        }
        default:
          return json(res, 404, { error: { type: 'not_found', message: `fake provider has no ${path}` } });
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  p.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  p.close = () =>
    new Promise((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return p;
}
