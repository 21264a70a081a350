import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAgentKeyPair } from '../../src/identity/keys.js';
import { startReference, type ReferenceServer } from '../support/agent-auth-reference.js';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call } from '../support/http.js';
import { ISSUER, registrationPolicy } from '../support/registration.js';

/** The kind of a JSON value, for comparing shapes across servers. */
const kind = (v: unknown) => (Array.isArray(v) ? 'array' : v === null ? 'null' : typeof v);

/** Endpoint names the sidecar publishes of its own (not in the protocol). */
const OWN = new Set(['constraints', 'request_permission']);

/**
 * What a protocol client reads from discovery and describe, compared with the
 * Agent Auth Protocol's reference server (in this process): the same members
 * of the same kinds, endpoints as absolute URLs under the same names, and
 * default_location as the execute endpoint.
 */
describe('discovery and describe_capability, against the reference server', () => {
  let env: TestSidecar;
  let ref: ReferenceServer;

  beforeAll(async () => {
    const hostKeys = await generateAgentKeyPair();
    env = await startTestSidecar({ policy: registrationPolicy(hostKeys), logLevel: 'error' });
    ref = await startReference({
      capabilities: [{ name: 'createInvoice', description: 'Create an invoice', input: { type: 'object' } }],
      agents: [],
    });
  });
  afterAll(async () => {
    await env.close();
    await ref.close();
  });

  it('publishes every member of the reference discovery document, of the same kind, with absolute endpoint URLs', async () => {
    const theirs = (await call(`${ref.issuer}/agent-configuration`)).json as Record<string, unknown>;
    const ours = (await call(`${env.url}/.well-known/agent-configuration`)).json as Record<string, unknown>;
    expect(theirs.version).toBe('1.0-draft');
    for (const [member, value] of Object.entries(theirs)) {
      if (member === 'jwks_uri') continue; // a host key set the sidecar does not publish (hosts are in its policy)
      expect(ours, member).toHaveProperty(member);
      expect(kind(ours[member]), member).toBe(kind(value));
    }
    expect(ours.version).toBe(theirs.version);
    // Both: default_location is the execute endpoint; every endpoint an absolute URL on the issuer's origin.
    const theirEndpoints = theirs.endpoints as Record<string, string>;
    const ourEndpoints = ours.endpoints as Record<string, string>;
    expect(theirs.default_location).toBe(theirEndpoints.execute);
    expect(ours.default_location).toBe(ourEndpoints.execute);
    for (const [name, url] of Object.entries(ourEndpoints)) {
      expect(new URL(url).origin, name).toBe(ISSUER);
      if (!OWN.has(name)) expect(Object.keys(theirEndpoints), `${name} is a protocol endpoint name`).toContain(name);
    }
    for (const name of ['register', 'capabilities', 'describe_capability', 'execute', 'status', 'revoke', 'rotate_key', 'introspect'])
      expect(ourEndpoints, name).toHaveProperty(name);
    // Both serve each published path (the reference under its base path).
    const refPath = new URL(ref.issuer).pathname;
    expect(new URL(theirEndpoints.describe_capability!).pathname).toBe(`${refPath}${new URL(ourEndpoints.describe_capability!).pathname}`);
  });

  it('describes a capability with the members the reference answers, and both answer a garbage token inactive', async () => {
    const theirs = (await call(`${ref.issuer}/capability/describe?name=createInvoice`)).json as Record<string, unknown>;
    const ours = (await call(`${env.url}/capability/describe?name=createInvoice`)).json as Record<string, unknown>;
    expect(theirs).toMatchObject({ name: 'createInvoice', description: 'Create an invoice' });
    for (const [member, value] of Object.entries(theirs)) {
      if (member === 'input') continue; // the sidecar's capability has no schema in this policy
      expect(ours, member).toHaveProperty(member);
      expect(kind(ours[member]), member).toBe(kind(value));
    }
    const missing = {
      theirs: (await call(`${ref.issuer}/capability/describe?name=nope`)).status,
      ours: (await call(`${env.url}/capability/describe?name=nope`)).status,
    };
    expect(missing).toEqual({ theirs: 404, ours: 404 });
    const inactive = async (url: string) => (await call(url, { method: 'POST', body: { token: 'not.a.token' } })).json;
    expect(await inactive(`${env.url}/agent/introspect`)).toEqual(await inactive(`${ref.issuer}/agent/introspect`));
  });
});
