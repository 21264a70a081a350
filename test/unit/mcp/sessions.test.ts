import { describe, expect, it } from 'vitest';
import { mcpSessionStore, sessionIdOf } from '../../../src/mcp/sessions.js';

function store(over: Partial<{ maxSessions: number; perOwner: number; idleMs: number }> = {}) {
  let now = 1_000;
  const s = mcpSessionStore({ maxSessions: 5, perOwner: 3, idleMs: 10_000, now: () => now, ...over });
  return { s, advance: (ms: number) => void (now += ms) };
}

describe('mcpSessionStore', () => {
  it('knows who opened a session, until it ends', () => {
    const { s } = store();
    s.bind('a', 'bot');
    expect(s.ownerOf('a')).toBe('bot');
    expect(s.ownerOf('b')).toBeUndefined();
    s.end('a');
    expect(s.ownerOf('a')).toBeUndefined();
  });

  it('forgets a session idle longer than idleMs; a use keeps it', () => {
    const { s, advance } = store();
    s.bind('a', 'bot');
    s.bind('b', 'bot');
    advance(8_000);
    expect(s.ownerOf('a')).toBe('bot');
    advance(8_000);
    expect(s.ownerOf('a')).toBe('bot');
    expect(s.ownerOf('b')).toBeUndefined();
  });

  it("one agent past its own cap forgets its own least recently used session, not another agent's", () => {
    const { s } = store();
    s.bind('victim', 'other');
    for (const id of ['1', '2', '3']) s.bind(id, 'bot');
    s.ownerOf('1'); // used: now '2' is the bot's oldest
    s.bind('4', 'bot');
    expect(['1', '2', '3', '4'].map((id) => s.ownerOf(id))).toEqual(['bot', undefined, 'bot', 'bot']);
    expect(s.ownerOf('victim')).toBe('other');
  });

  it('past the global bound the least recently used session is forgotten', () => {
    const { s } = store({ perOwner: 10 });
    for (const id of ['1', '2', '3', '4', '5', '6']) s.bind(id, `agent-${id}`);
    expect(s.size).toBe(5);
    expect(s.ownerOf('1')).toBeUndefined();
    expect(s.ownerOf('6')).toBe('agent-6');
  });

  it('counts open streams per agent, never below zero', () => {
    const { s } = store();
    expect([s.openStream('bot', 2), s.openStream('bot', 2), s.openStream('bot', 2)]).toEqual([true, true, false]);
    expect(s.openStream('other', 2)).toBe(true);
    s.closeStream('bot');
    expect(s.openStream('bot', 2)).toBe(true);
    s.closeStream('nobody');
    s.closeStream('nobody');
    expect(s.openStream('nobody', 1)).toBe(true);
    expect(s.openStream('nobody', 1)).toBe(false);
  });
});

describe('sessionIdOf', () => {
  it('reads the one Mcp-Session-Id in any case; several are null', () => {
    expect(sessionIdOf(['Host', 'x', 'Mcp-Session-Id', 'abc'])).toBe('abc');
    expect(sessionIdOf(['host', 'x'])).toBeUndefined();
    expect(sessionIdOf(['mcp-session-id', 'a', 'MCP-SESSION-ID', 'b'])).toBeNull();
  });
});
