import { describe, expect, it } from 'vitest';
import { generateAgentKeyPair, thumbprintOf } from '../../../src/identity/keys.js';
import { loadPolicyText } from '../../../src/policy/load.js';
import { RegisteredAgents } from '../../../src/registration/directory.js';
import { MemoryAgentRegistry, type RegisteredAgent } from '../../../src/registration/registry.js';
import { encode } from '../../support/ed25519.js';
import { registrationPolicy } from '../../support/registration.js';

describe('RegisteredAgents', () => {
  it('treats a stored agent whose key is unsafe (recorded before keys were vetted) as unknown, not as an error', async () => {
    const host = await generateAgentKeyPair();
    const policy = await loadPolicyText(registrationPolicy(host));
    const registry = new MemoryAgentRegistry();
    const record = async (x: string): Promise<RegisteredAgent> => {
      const thumbprint = await thumbprintOf({ kty: 'OKP', crv: 'Ed25519', x });
      return {
        id: `agt_${thumbprint}`,
        name: 'a',
        hostId: 'laptop-host',
        publicKey: { kty: 'OKP', crv: 'Ed25519', x },
        thumbprint,
        mode: 'autonomous',
        status: 'active',
        grants: [],
        registeredAt: 0,
      };
    };
    const unsafe = await record(encode(1n, 0).toString('base64url'));
    const safe = await record((await generateAgentKeyPair()).publicJwk.x!);
    await registry.register(unsafe, 10);
    await registry.register(safe, 10);
    const agents = new RegisteredAgents(registry);
    await expect(agents.get(unsafe.id, policy)).resolves.toBeUndefined();
    await expect(agents.get(safe.id, policy)).resolves.toMatchObject({ id: safe.id, hostId: 'laptop-host' });
  });
});
