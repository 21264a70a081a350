import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentSigner, type AgentSigner } from '../../src/identity/client.js';
import { ROOT, requireBuild, startCli, serveArgs } from '../support/cli.js';
import { call } from '../support/http.js';
import { startRecorder, type Recorder } from '../support/recorder.js';

/**
 * AGENTS_CHAIN_ED25519=pool: agent tokens are verified by node:crypto on libuv's thread pool, off the event
 * loop. The real sidecar process says so at startup and answers exactly as with libsodium: a good token
 * passes once, a forged or replayed one is refused before the app.
 */
describe('the thread-pool verifier (AGENTS_CHAIN_ED25519=pool)', () => {
  let app: Recorder;
  let sidecar: Awaited<ReturnType<typeof startCli>>;
  let url: string;
  let bot: AgentSigner;

  beforeAll(async () => {
    requireBuild();
    app = await startRecorder();
    sidecar = await startCli(serveArgs(app.url), /sidecar listening/, { AGENTS_CHAIN_ED25519: 'pool' });
    url = (JSON.parse(sidecar.line) as { listen: string }).listen;
    bot = await createAgentSigner(JSON.parse(await readFile(`${ROOT}config/examples/keys/billing-bot.private.jwk.json`, 'utf8')), 'agent-billing-bot');
  });
  afterAll(async () => {
    sidecar?.child.kill('SIGKILL');
    await app?.close();
  });

  it('names the verifier at startup', () => {
    expect(sidecar.output()).toContain('"ed25519":"node:crypto on the thread pool"');
  });

  it('forwards a call with a good token once, and refuses its replay and a forged signature before the app', async () => {
    const token = await bot.sign('getInvoice');
    expect((await call(url, { path: '/invoices/inv-1', token })).status).toBe(200);
    expect(app.requests).toHaveLength(1);
    const replay = await call(url, { path: '/invoices/inv-1', token });
    expect({ status: replay.status, error: (replay.json as { error?: string }).error }).toEqual({ status: 401, error: 'token_replayed' });
    const fresh = await bot.sign('getInvoice');
    const forged = `${fresh.slice(0, fresh.lastIndexOf('.') + 1)}${Buffer.alloc(64, 7).toString('base64url')}`;
    const refused = await call(url, { path: '/invoices/inv-1', token: forged });
    expect({ status: refused.status, error: (refused.json as { error?: string }).error }).toEqual({ status: 401, error: 'token_invalid' });
    expect(app.requests).toHaveLength(1);
  });
});
