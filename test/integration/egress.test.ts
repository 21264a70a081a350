import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { parseKeyring } from '../../src/audit/crypto.js';
import type { AuditEntry } from '../../src/audit/entry.js';
import { generateAgentKeyPair, type AgentKeyPair } from '../../src/identity/keys.js';
import { until } from '../support/until.js';
import type { Sidecar } from '../../src/sidecar/start.js';
import { startTestSidecar } from '../support/fixture.js';
import { call } from '../support/http.js';
import { startFakeProvider, type FakeProvider } from '../support/fake-provider.js';

const PROVIDER_KEY = 'sk-sidecar-held-provider-key-0123456789';
const AGENT_SDK_KEY = 'sk-agent-placeholder-not-a-real-key';

function openaiPolicy(agent: AgentKeyPair, unmapped = 'pass'): string {
  return `
version: 1
mode: egress
preset: openai
unmapped: ${unmapped}
constraintAware: true
provider: { name: summarizer-egress, issuer: https://summarizer.internal }
agents:
  - { id: summarizer, name: summarizer, publicKey: { kty: OKP, crv: Ed25519, x: "${agent.publicJwk.x}" } }
grants:
  - agent: summarizer
    capability: chat.completion
    status: active
    constraints:
      model: { in: [gpt-4o-mini] }
      max_tokens: { max: 1024 }
  - { agent: summarizer, capability: embedding, status: active }
  - { agent: summarizer, capability: response, status: active, constraints: { model: { in: [gpt-4o-mini] } } }
  - { agent: summarizer, capability: audio.transcription, status: active }
`;
}

function anthropicPolicy(agent: AgentKeyPair): string {
  return `
version: 1
mode: egress
preset: anthropic
provider: { name: classifier-egress, issuer: https://classifier.internal }
agents:
  - { id: classifier, name: classifier, publicKey: { kty: OKP, crv: Ed25519, x: "${agent.publicJwk.x}" } }
grants:
  - { agent: classifier, capability: message, status: active, constraints: { model: { in: [claude-haiku-4-5] }, max_tokens: { max: 1024 } } }
  - { agent: classifier, capability: message.stream, status: active, constraints: { model: { in: [claude-haiku-4-5] } } }
  - { agent: classifier, capability: message.count_tokens, status: active }
`;
}

const AUDIT_KEY = parseKeyring(randomBytes(32).toString('base64'));
const ADMIN = 'egress-admin-token-0123456789';

async function egressSidecar(policyText: string, agentId: string, agent: AgentKeyPair, provider: FakeProvider, logs: string[] = []): Promise<Sidecar> {
  const env = await startTestSidecar({
    policy: policyText,
    policyName: 'egress.yaml',
    app: provider,
    logs,
    metrics: { processMetrics: false },
    egress: { agentId, agentKey: agent.privateJwk, providerKey: PROVIDER_KEY },
    adminToken: ADMIN,
    audit: { keyring: AUDIT_KEY, exporters: [], flushIntervalMs: 10 },
  });
  return env.sidecar;
}

async function auditEntries(sidecar: Sidecar): Promise<AuditEntry[]> {
  const r = await call(sidecar.adminUrl, { path: '/stats/entries?limit=500', token: ADMIN });
  return (r.json as { entries: AuditEntry[] }).entries;
}

describe('egress: the official OpenAI SDK through the sidecar', () => {
  let provider: FakeProvider;
  let sidecar: Sidecar;
  let client: OpenAI;
  const logs: string[] = [];
  beforeAll(async () => {
    const agent = await generateAgentKeyPair();
    provider = await startFakeProvider();
    sidecar = await egressSidecar(openaiPolicy(agent), 'summarizer', agent, provider, logs);
    client = new OpenAI({ apiKey: AGENT_SDK_KEY, baseURL: `${sidecar.url}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await sidecar.close();
    await provider.close();
  });

  it("chat completions, embeddings and responses reach the provider with the sidecar's key, never the agent's", async () => {
    const chat = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Summarize the water cycle.' }],
    });
    expect(chat.choices[0]!.message.content).toBe('The water cycle, briefly.');
    const emb = await client.embeddings.create({ model: 'text-embedding-3-small', input: 'hi' });
    expect(emb.data[0]!.embedding).toEqual([0.5, 0.25, -1]);
    const resp = await client.responses.create({ model: 'gpt-4o-mini', input: 'Say hello' });
    expect(resp.output_text).toBe('Hello from responses');
    expect(provider.requests.map((r) => r.url)).toEqual(['/v1/chat/completions', '/v1/embeddings', '/v1/responses']);
    for (const r of provider.requests) {
      expect(r.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
      expect(JSON.stringify(r.headers)).not.toContain(AGENT_SDK_KEY);
      expect(r.headers['x-agent-id']).toBeUndefined();
      expect(r.headers.host).toBe(new URL(provider.url).host);
    }
    expect(logs.join('')).not.toContain(PROVIDER_KEY);
  });

  it("a disallowed model is refused: the SDK raises an API error with status 403, OpenAI's error shape, the envelope inside", async () => {
    const seen = provider.requests.length;
    const err = await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    const api = err as InstanceType<typeof OpenAI.APIError>;
    expect(api.status).toBe(403);
    // OpenAI's error object: the stable code in code, the words in the message (more in egress-sdk-errors.test.ts).
    expect(api.code).toBe('constraint_violated');
    expect(api.message).toContain('constraint_violated');
    // The whole envelope went over the wire, as error.agents_chain.
    const raw = await call(sidecar, { method: 'POST', path: '/v1/chat/completions', body: { model: 'gpt-4o', messages: [] } });
    expect(raw.status).toBe(403);
    expect((raw.json as { error: { agents_chain: unknown } }).error.agents_chain).toMatchObject({
      success: false,
      permission: 'constraint_violated',
      capability: 'chat.completion',
      error: 'constraint_violated',
      violations: expect.arrayContaining([expect.objectContaining({ field: 'model' })]),
    });
    expect(provider.requests.length).toBe(seen);
    expect(JSON.stringify(api.error)).not.toContain(PROVIDER_KEY);
  });

  it('a capability without a grant is refused; an unmapped path passes through as sent, without the provider key', async () => {
    const err = (await client.moderations.create({ input: 'x' }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(err.status).toBe(403);
    expect(JSON.stringify(err.error)).toContain('capability_denied');
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['gpt-4o-mini']);
    // Unchecked, so never with the sidecar's key: the request goes as the agent sent it.
    expect(provider.requests.at(-1)).toMatchObject({ url: '/v1/models', headers: { authorization: `Bearer ${AGENT_SDK_KEY}` } });
    expect(provider.requests.at(-1)!.headers.host).toBe(new URL(provider.url).host);
  });

  it('forwards a multipart transcription upload unmodified', async () => {
    const audio = Buffer.from('RIFF....WAVEfmt fake audio bytes');
    const result = await client.audio.transcriptions.create({ model: 'whisper-1', file: await OpenAI.toFile(audio, 'hello.wav', { type: 'audio/wav' }) });
    expect(result.text).toBe('hello');
    const r = provider.requests.at(-1)!;
    expect(r.url).toBe('/v1/audio/transcriptions');
    expect(String(r.headers['content-type'])).toMatch(/^multipart\/form-data; boundary=/);
    expect(r.body.includes(audio)).toBe(true);
    expect(Number(r.headers['content-length'])).toBe(r.body.length);
  });

  it('unmapped: deny refuses paths outside the table', async () => {
    const agent = await generateAgentKeyPair();
    const denying = await egressSidecar(openaiPolicy(agent, 'deny'), 'summarizer', agent, provider);
    try {
      const c = new OpenAI({ apiKey: AGENT_SDK_KEY, baseURL: `${denying.url}/v1`, maxRetries: 0 });
      const err = (await c.models.list().catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(err.status).toBe(404);
      expect(JSON.stringify(err.error)).toContain('unknown_route');
    } finally {
      await denying.close();
    }
  });
});

describe('egress: the official Anthropic SDK through the sidecar', () => {
  let provider: FakeProvider;
  let sidecar: Sidecar;
  let client: Anthropic;
  beforeAll(async () => {
    const agent = await generateAgentKeyPair();
    provider = await startFakeProvider();
    sidecar = await egressSidecar(anthropicPolicy(agent), 'classifier', agent, provider);
    client = new Anthropic({ apiKey: AGENT_SDK_KEY, baseURL: sidecar.url, maxRetries: 0 });
  });
  afterAll(async () => {
    await sidecar.close();
    await provider.close();
  });

  it("messages and count_tokens go through with the sidecar's x-api-key", async () => {
    const msg = await client.messages.create({ model: 'claude-haiku-4-5', max_tokens: 256, messages: [{ role: 'user', content: 'Classify: "I love it!"' }] });
    expect(msg.content[0]).toMatchObject({ type: 'text', text: 'positive' });
    const count = await client.messages.countTokens({ model: 'claude-haiku-4-5', messages: [{ role: 'user', content: 'hi' }] });
    expect(count.input_tokens).toBe(12);
    for (const r of provider.requests) {
      expect(r.headers['x-api-key']).toBe(PROVIDER_KEY);
      expect(r.headers.authorization).toBeUndefined();
    }
  });

  it('streams messages.stream() events as they come (message.stream capability)', async () => {
    const stream = client.messages.stream({ model: 'claude-haiku-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello' }] });
    const arrivals: { text: string; at: number }[] = [];
    stream.on('text', (text) => arrivals.push({ text, at: Date.now() }));
    const final = await stream.finalMessage();
    expect(final.content[0]).toMatchObject({ type: 'text', text: 'Hello' });
    expect(arrivals.map((a) => a.text)).toEqual(['Hel', 'lo']);
    // The first delta reached the SDK before the provider sent the rest (it pauses 400 ms after it).
    const ended = await provider.streamEnded!;
    expect(ended - arrivals[0]!.at).toBeGreaterThan(300);
    expect(JSON.parse(provider.requests.at(-1)!.body.toString()).stream).toBe(true);
  });

  it('reads beta messages (the anthropic-beta header) as message.beta, which needs its own grant', async () => {
    const err = await client.beta.messages
      .create({ model: 'claude-haiku-4-5', max_tokens: 64, betas: ['token-efficient-tools-2025-02-19'], messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(403);
    expect(JSON.stringify((err as InstanceType<typeof Anthropic.APIError>).error)).toContain('capability_denied');
  });

  it("a call that is two capabilities is held to both grants' constraints (a streamed beta message)", async () => {
    const agent = await generateAgentKeyPair();
    const both = await egressSidecar(
      anthropicPolicy(agent).replace('grants:\n', 'grants:\n  - { agent: classifier, capability: message.beta, status: active }\n'),
      'classifier',
      agent,
      provider,
    );
    const betaClient = new Anthropic({ apiKey: AGENT_SDK_KEY, baseURL: both.url, maxRetries: 0 });
    const seen = provider.requests.length;
    try {
      // message.beta allows any model, message.stream only haiku: a streamed beta call with another model is refused.
      const err = await betaClient.beta.messages
        .create({
          model: 'claude-opus-4-1',
          max_tokens: 64,
          stream: true,
          betas: ['token-efficient-tools-2025-02-19'],
          messages: [{ role: 'user', content: 'x' }],
        })
        .catch((e: unknown) => e);
      expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(403);
      expect(JSON.stringify((err as InstanceType<typeof Anthropic.APIError>).error)).toContain('constraint_violated');
      expect(provider.requests.length).toBe(seen);
      // Within both grants it goes through.
      const stream = await betaClient.beta.messages.create({
        model: 'claude-haiku-4-5',
        max_tokens: 64,
        stream: true,
        betas: ['token-efficient-tools-2025-02-19'],
        messages: [{ role: 'user', content: 'x' }],
      });
      for await (const _event of stream) {
        /* drain */
      }
      expect(provider.requests.length).toBe(seen + 1);
    } finally {
      await both.close();
    }
  });

  it("audits every model call; a stream's entry is completed when it ends, with its bytes", async () => {
    await until(async () => (await auditEntries(sidecar)).some((e) => e.capability === 'message.stream' && e.result === 'success'));
    const entries = await auditEntries(sidecar);
    const stream = entries.find((e) => e.capability === 'message.stream' && e.result === 'success')!;
    expect(stream).toMatchObject({ agentId: 'classifier', status: 200, upstreamStatus: 200, path: '/v1/messages' });
    expect(stream.durationMs).toBeGreaterThanOrEqual(350); // the provider paused 400 ms mid-stream
    expect(stream.responseBytes).toBeGreaterThan(500);
    expect((stream.args as { model: string }).model).toBe('claude-haiku-4-5');
    expect(entries.map((e) => e.capability)).toEqual(expect.arrayContaining(['message', 'message.count_tokens', 'message.stream']));
    expect(JSON.stringify(entries)).not.toContain(PROVIDER_KEY);
  });

  it('refuses a "stream" flag that is not a boolean (it could be streamed while checked as a plain message)', async () => {
    const r = await call(sidecar, { method: 'POST', path: '/v1/messages', body: { model: 'claude-haiku-4-5', max_tokens: 10, stream: 'true', messages: [] } });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', details: { error_code: 'invalid_body' } } });
  });

  it('refuses a model outside the grant, for streaming calls too', async () => {
    const seen = provider.requests.length;
    const err = await client.messages
      .create({ model: 'claude-opus-4-1', max_tokens: 256, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(403);
    expect(JSON.stringify((err as InstanceType<typeof Anthropic.APIError>).error)).toContain('constraint_violated');
    const streamErr = await client.messages
      .stream({ model: 'claude-opus-4-1', max_tokens: 64, messages: [{ role: 'user', content: 'x' }] })
      .finalMessage()
      .catch((e: unknown) => e);
    expect((streamErr as InstanceType<typeof Anthropic.APIError>).status).toBe(403);
    expect(provider.requests.length).toBe(seen);
  });
});

describe('egress with the built CLI and the example policy', () => {
  it('serve --agent-key --agent, the provider key from the environment; refuses to start without them', async () => {
    const { ROOT, requireBuild, runCli, startCli, startupFailure } = await import('../support/cli.js');
    requireBuild();
    const provider = await startFakeProvider();
    const policy = `${ROOT}config/examples/egress-openai.yaml`;
    const missing = await runCli(['serve', '--policy', policy, '--upstream', provider.url, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'], {
      AGENTS_CHAIN_PROVIDER_KEY: PROVIDER_KEY,
    });
    expect(missing.code).toBe(2);
    expect(startupFailure(missing).error).toMatch(/egress mode needs --agent-key FILE and --agent ID/);
    const remote = await runCli(
      [
        'serve',
        '--policy',
        policy,
        '--upstream',
        provider.url,
        '--listen',
        '0.0.0.0:0',
        '--admin',
        '127.0.0.1:0',
        '--agent-key',
        `${ROOT}config/examples/keys/report-bot.private.jwk.json`,
        '--agent',
        'agent-report-bot',
      ],
      { AGENTS_CHAIN_PROVIDER_KEY: PROVIDER_KEY },
    );
    expect(remote.code).toBe(2);
    expect(startupFailure(remote).error).toMatch(/anyone who reaches --listen 0\.0\.0\.0:0 acts as the agent/);
    const sc = await startCli(
      [
        'serve',
        '--policy',
        policy,
        '--upstream',
        provider.url,
        '--listen',
        '127.0.0.1:0',
        '--admin',
        '127.0.0.1:0',
        '--agent-key',
        `${ROOT}config/examples/keys/report-bot.private.jwk.json`,
        '--agent',
        'agent-report-bot',
      ],
      /sidecar listening/,
      { AGENTS_CHAIN_PROVIDER_KEY: PROVIDER_KEY },
    );
    try {
      const client = new OpenAI({ apiKey: AGENT_SDK_KEY, baseURL: `${JSON.parse(sc.line).listen}/v1`, maxRetries: 0 });
      const chat = await client.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 50, n: 1, messages: [{ role: 'user', content: 'hi' }] });
      expect(chat.choices[0]!.message.content).toBe('The water cycle, briefly.');
      expect(provider.requests.at(-1)!.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
      expect(sc.output()).not.toContain(PROVIDER_KEY);
    } finally {
      sc.child.kill('SIGTERM');
      await provider.close();
    }
  });
});
