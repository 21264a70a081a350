/**
 * Which agent opened each MCP session. The server's session id is a bearer
 * value: without this, any agent holding some session grant could send on
 * another agent's session (and, with the SDK server, take the answer to a
 * call in flight by reusing its JSON-RPC id), or end it. The sidecar sits in
 * the server's pod, so a session lives with one sidecar process: a map in
 * memory is enough. After a restart the ids are unknown, refused with 404, and
 * the client starts a new session, as the transport's spec tells it to.
 */
export interface McpSessionStore {
  /** The agent (key thumbprint) that opened `sessionId`, or undefined. Counts as use. */
  ownerOf(sessionId: string): string | undefined;
  bind(sessionId: string, owner: string): void;
  end(sessionId: string): void;
  readonly size: number;
  /** One more server stream for `owner`, unless it holds `max` already (false). */
  openStream(owner: string, max: number): boolean;
  closeStream(owner: string): void;
}

export function mcpSessionStore(opts: { maxSessions: number; perOwner: number; idleMs: number; now: () => number }): McpSessionStore {
  // Insertion order is use order (a use re-inserts): the first entry is the least recently used.
  const sessions = new Map<string, { owner: string; seenAt: number }>();
  const streams = new Map<string, number>();
  return {
    openStream(owner, max) {
      const open = streams.get(owner) ?? 0;
      if (open >= max) return false;
      streams.set(owner, open + 1);
      return true;
    },
    closeStream(owner) {
      const open = (streams.get(owner) ?? 1) - 1;
      if (open > 0) streams.set(owner, open);
      else streams.delete(owner);
    },
    ownerOf(sessionId) {
      const s = sessions.get(sessionId);
      if (!s) return undefined;
      const now = opts.now();
      sessions.delete(sessionId);
      if (now - s.seenAt > opts.idleMs) return undefined;
      sessions.set(sessionId, { owner: s.owner, seenAt: now });
      return s.owner;
    },
    bind(sessionId, owner) {
      sessions.delete(sessionId);
      // One agent opening sessions without end forgets its own oldest, not everyone else's.
      let mine = 0;
      for (const s of sessions.values()) if (s.owner === owner) mine++;
      for (const [id, s] of sessions) {
        if (mine < opts.perOwner) break;
        if (s.owner !== owner) continue;
        sessions.delete(id);
        mine--;
      }
      sessions.set(sessionId, { owner, seenAt: opts.now() });
      // Past the bound, the least recently used session is forgotten (its next request is refused; the client starts anew).
      while (sessions.size > opts.maxSessions) {
        const oldest = sessions.keys().next();
        if (oldest.done) break;
        sessions.delete(oldest.value);
      }
    },
    end(sessionId) {
      sessions.delete(sessionId);
    },
    get size() {
      return sessions.size;
    },
  };
}

/** The one Mcp-Session-Id a request carries, undefined for none, or null when it carries several (refused). */
export function sessionIdOf(raw: readonly string[]): string | undefined | null {
  let found: string | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]?.toLowerCase() !== 'mcp-session-id') continue;
    if (found !== undefined) return null;
    found = raw[i + 1] ?? '';
  }
  return found;
}
