/**
 * Rewrites the MCP server's answer to one JSON-RPC request (e.g. filters `result.tools` of a `tools/list`
 * answer) when the body is `application/json`: one JSON-RPC message, or an array of them. The SSE form of the
 * same answer goes through `sseRewriter` (./sse.ts), which uses `rewriteJsonText` on each event's data.
 */

/**
 * Receives each parsed JSON-RPC message and returns the message to send: the same object (possibly changed in
 * place) or a new one. Returning `undefined` keeps the message as it was (JSON.stringify would drop it).
 */
export type MessageRewrite = (message: unknown) => unknown;

/** JSON-RPC messages are objects, batches arrays: only text that can start one is worth a JSON.parse. */
const MESSAGE_START = /^[ \t\n\r]*[{[]/;

function apply(message: unknown, rewrite: MessageRewrite): unknown {
  const out = rewrite(message);
  return out === undefined ? message : out;
}

/**
 * The rewritten JSON text, or `undefined` when `text` is not a JSON object or array (left for the caller to
 * pass through byte for byte). The output is always re-serialized, even if nothing changed: the client then
 * parses exactly the value the rewrite saw (JSON.parse keeps the last of duplicate keys; other parsers may not).
 */
export function rewriteJsonText(text: string, rewrite: MessageRewrite): string | undefined {
  if (!MESSAGE_START.test(text)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const out = Array.isArray(parsed) ? parsed.map((m) => apply(m, rewrite)) : apply(parsed, rewrite);
  return JSON.stringify(out);
}
