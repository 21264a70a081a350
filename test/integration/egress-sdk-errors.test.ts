import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateAgentKeyPair, type AgentKeyPair } from '../../src/identity/keys.js';
import type { Sidecar } from '../../src/sidecar/start.js';
import { startTestSidecar } from '../support/fixture.js';
import { startFakeProvider, type FakeProvider } from '../support/fake-provider.js';

/**
 * A refusal the sidecar makes in egress mode, as the official SDKs show it:
 * the provider's error shape, so `err.message` says what was wrong and
 * `err.status` is the sidecar's status. Nothing refused reaches the provider.
 */

const PROVIDER_KEY = 'sk-sidecar-held-provider-key-errors-0123';

function openaiPolicy(agent: AgentKeyPair): string {
  return `
version: 1
mode: egress
preset: openai
unmapped: deny
constraintAware: true
provider: { name: writer-egress, issuer: https://writer.internal }
agents:
  - { id: writer, name: writer, publicKey: { kty: OKP, crv: Ed25519, x: "${agent.publicJwk.x}" } }
grants:
  - agent: writer
    capability: chat.completion
    status: active
    constraints:
      model: { in: [gpt-4o-mini, gpt-4.1-mini] }
      max_tokens: { max: 1024 }
  - { agent: writer, capability: image.generation, status: active }
`;
}

function anthropicPolicy(agent: AgentKeyPair): string {
  return `
version: 1
mode: egress
preset: anthropic
provider: { name: tagger-egress, issuer: https://tagger.internal }
agents:
  - { id: tagger, name: tagger, publicKey: { kty: OKP, crv: Ed25519, x: "${agent.publicJwk.x}" } }
grants:
  - { agent: tagger, capability: message, status: active, constraints: { model: { in: [claude-haiku-4-5] }, max_tokens: { max: 512 } } }
  - { agent: tagger, capability: message.stream, status: active, constraints: { model: { in: [claude-haiku-4-5] } } }
`;
}

async function egressSidecar(policy: string, agentId: string, agent: AgentKeyPair, provider: { url: string }): Promise<Sidecar> {
  const env = await startTestSidecar({
    policy,
    policyName: 'egress.yaml',
    app: provider,
    metrics: { processMetrics: false },
    egress: { agentId, agentKey: agent.privateJwk, providerKey: PROVIDER_KEY },
  });
  return env.sidecar;
}

/**
 * The fake provider answers OpenAI calls as JSON only: a streamed chat completion is answered here (and
 * recorded in the fake's list), everything else is relayed to the fake.
 */
async function withOpenAIStreaming(fake: FakeProvider): Promise<{ url: string; close(): Promise<void> }> {
  const target = new URL(fake.url);
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const streamed = req.url === '/v1/chat/completions' && (JSON.parse(body.toString() || '{}') as { stream?: unknown }).stream === true;
      if (!streamed) {
        const out = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        });
        return void out.end(body);
      }
      fake.requests.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const chunk = (delta: object, finish: string | null) =>
        `data: ${JSON.stringify({ id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(chunk({ role: 'assistant', content: 'Hel' }, null));
      res.write(chunk({ content: 'lo' }, null));
      res.write(chunk({}, 'stop'));
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

type OpenAIError = InstanceType<typeof OpenAI.APIError>;
type AnthropicError = InstanceType<typeof Anthropic.APIError>;

describe('egress refusals through the official OpenAI SDK', () => {
  let provider: FakeProvider;
  let streaming: { url: string; close(): Promise<void> };
  let sidecar: Sidecar;
  let client: OpenAI;
  beforeAll(async () => {
    const agent = await generateAgentKeyPair();
    provider = await startFakeProvider();
    streaming = await withOpenAIStreaming(provider);
    sidecar = await egressSidecar(openaiPolicy(agent), 'writer', agent, streaming);
    client = new OpenAI({ apiKey: 'sk-unused', baseURL: `${sidecar.url}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await sidecar.close();
    await streaming.close();
    await provider.close();
  });

  const refused = async (run: () => Promise<unknown>): Promise<OpenAIError> => {
    const seen = provider.requests.length;
    const err = await run().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(provider.requests.length).toBe(seen);
    return err as OpenAIError;
  };

  it('a permitted call still succeeds', async () => {
    const chat = await client.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.choices[0]!.message.content).toBe('The water cycle, briefly.');
    expect(provider.requests.at(-1)!.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
  });

  it('a model outside the grant: PermissionDeniedError, 403, the field and the allowed models in err.message', async () => {
    const err = await refused(() => client.chat.completions.create({ model: 'gpt-4o', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }));
    expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(err.status).toBe(403);
    expect(err.message).toMatch(/^403 agents-chain refused this chat\.completion call \(constraint_violated\): model must be one of/);
    for (const word of ['"gpt-4o"', '"gpt-4o-mini"', '"gpt-4.1-mini"', 'max_tokens']) expect(err.message).toContain(word);
    expect(err).toMatchObject({ code: 'constraint_violated', param: 'model', type: 'permission_error' });
    expect(err.headers?.get('x-request-id')).toBeTruthy();
    // constraintAware: the envelope rides along in err.error.agents_chain.
    expect((err.error as { agents_chain: unknown }).agents_chain).toMatchObject({
      success: false,
      permission: 'constraint_violated',
      capability: 'chat.completion',
      error: 'constraint_violated',
      violations: [expect.objectContaining({ field: 'model', actual: 'gpt-4o' })],
      activeConstraints: { max_tokens: { max: 1024 } },
    });
    expect(JSON.stringify(err.error)).not.toContain(PROVIDER_KEY);
  });

  it('max_tokens over the grant, and max_tokens left out: the message says which', async () => {
    const over = await refused(() => client.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 4096, messages: [{ role: 'user', content: 'hi' }] }));
    expect(over.status).toBe(403);
    expect(over.param).toBe('max_tokens');
    expect(over.message).toMatch(/max_tokens[^;]*1024[^;]*4096/);
    const absent = await refused(() => client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }));
    expect(absent.message).toContain('max_tokens');
    expect(absent.param).toBe('max_tokens');
  });

  it('a capability without a grant and an unmapped path (unmapped: deny) are readable too', async () => {
    const denied = await refused(() => client.embeddings.create({ model: 'text-embedding-3-small', input: 'hi' }));
    expect(denied).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(denied).toMatchObject({ status: 403, code: 'capability_denied', param: null });
    expect(denied.message).toMatch(/^403 agents-chain refused this embedding call \(capability_denied\): .*"embedding"/);
    const unknown = await refused(() => client.models.list());
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect(unknown).toMatchObject({ status: 404, code: 'unknown_route', type: 'not_found_error' });
    expect(unknown.message).toContain('GET /v1/models');
  });

  it('streams a permitted call; a refused stream request throws the same error', async () => {
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const parts: string[] = [];
    for await (const chunk of stream) parts.push(chunk.choices[0]?.delta.content ?? '');
    expect(parts.join('')).toBe('Hello');
    expect(JSON.parse(provider.requests.at(-1)!.body.toString())).toMatchObject({ stream: true });
    const err = await refused(() =>
      client.chat.completions.create({ model: 'gpt-4o', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(err.status).toBe(403);
    expect(err.message).toContain('model must be one of');
  });

  it("the provider's own errors pass untouched", async () => {
    // Permitted, but the fake provider has no image API: its own 404 reaches the SDK as it sent it.
    const err = (await client.images.generate({ model: 'dall-e-3', prompt: 'a cat' }).catch((e: unknown) => e)) as OpenAIError;
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.message).toBe('404 fake provider has no /v1/images/generations');
    expect(err.error).toEqual({ type: 'not_found', message: 'fake provider has no /v1/images/generations' });
    expect(provider.requests.at(-1)!.url).toBe('/v1/images/generations');
  });
});

describe('egress refusals through the official Anthropic SDK', () => {
  let provider: FakeProvider;
  let sidecar: Sidecar;
  let client: Anthropic;
  beforeAll(async () => {
    const agent = await generateAgentKeyPair();
    provider = await startFakeProvider();
    sidecar = await egressSidecar(anthropicPolicy(agent), 'tagger', agent, provider);
    client = new Anthropic({ apiKey: 'sk-unused', baseURL: sidecar.url, maxRetries: 0 });
  });
  afterAll(async () => {
    await sidecar.close();
    await provider.close();
  });

  const refused = async (run: () => Promise<unknown>): Promise<AnthropicError> => {
    const seen = provider.requests.length;
    const err = await run().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(provider.requests.length).toBe(seen);
    return err as AnthropicError;
  };

  it('a permitted call still succeeds', async () => {
    const msg = await client.messages.create({ model: 'claude-haiku-4-5', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    expect(msg.content[0]).toMatchObject({ type: 'text', text: 'positive' });
  });

  it('a model outside the grant: PermissionDeniedError, 403, the words in err.message (not the body as JSON), the code in errorCode', async () => {
    const err = await refused(() => client.messages.create({ model: 'claude-opus-4-1', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }));
    expect(err).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(err.status).toBe(403);
    expect(err.message).toMatch(
      /^403 agents-chain refused this message call \(constraint_violated\): model must be one of \["claude-haiku-4-5"\], got "claude-opus-4-1"/,
    );
    expect(err).toMatchObject({ type: 'permission_error', errorCode: 'constraint_violated' });
    expect(err.apiMessage).toBe(err.message.slice('403 '.length));
    // Not constraint-aware: the plain sidecar body rides along.
    expect(err.error).toMatchObject({
      type: 'error',
      error: { type: 'permission_error', details: { error_code: 'constraint_violated' } },
      agents_chain: { error: 'constraint_violated', violations: [expect.objectContaining({ field: 'model' })] },
    });
  });

  it('max_tokens over the grant names the field, the limit and the value sent', async () => {
    const err = await refused(() => client.messages.create({ model: 'claude-haiku-4-5', max_tokens: 2000, messages: [{ role: 'user', content: 'hi' }] }));
    expect(err.status).toBe(403);
    expect(err.message).toMatch(/max_tokens[^;]*512[^;]*2000/);
  });

  it('a capability without a grant (a beta message) and an unknown path are readable too', async () => {
    const beta = await refused(() =>
      client.beta.messages.create({
        model: 'claude-haiku-4-5',
        max_tokens: 10,
        betas: ['token-efficient-tools-2025-02-19'],
        messages: [{ role: 'user', content: 'x' }],
      }),
    );
    expect(beta).toMatchObject({ status: 403, errorCode: 'capability_denied', type: 'permission_error' });
    expect(beta.message).toMatch(/^403 agents-chain refused this message\.beta call \(capability_denied\): .*"message\.beta"/);
    // count_tokens is in the table but not granted.
    const count = await refused(() => client.messages.countTokens({ model: 'claude-haiku-4-5', messages: [{ role: 'user', content: 'x' }] }));
    expect(count).toMatchObject({ status: 403, errorCode: 'capability_denied' });
  });

  it('a "stream" flag that is not a boolean is a BadRequestError', async () => {
    const err = await refused(() =>
      client.messages.create({ model: 'claude-haiku-4-5', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], stream: 'yes' as never }),
    );
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(err).toMatchObject({ status: 400, type: 'invalid_request_error', errorCode: 'invalid_body' });
  });

  it('streams a permitted call; a refused stream throws the SDK error with the message', async () => {
    const stream = client.messages.stream({ model: 'claude-haiku-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello' }] });
    const texts: string[] = [];
    stream.on('text', (t) => texts.push(t));
    const final = await stream.finalMessage();
    expect(final.content[0]).toMatchObject({ type: 'text', text: 'Hello' });
    expect(texts).toEqual(['Hel', 'lo']);
    const err = await refused(() =>
      client.messages.stream({ model: 'claude-opus-4-1', max_tokens: 64, messages: [{ role: 'user', content: 'x' }] }).finalMessage(),
    );
    expect(err).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(err.message).toContain('model must be one of ["claude-haiku-4-5"]');
    const raw = await refused(async () => {
      for await (const _event of await client.messages.create({
        model: 'claude-opus-4-1',
        max_tokens: 64,
        stream: true,
        messages: [{ role: 'user', content: 'x' }],
      })) {
        /* never reached */
      }
    });
    expect(raw).toMatchObject({ status: 403, errorCode: 'constraint_violated' });
  });
});
