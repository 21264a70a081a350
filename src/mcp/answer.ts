/**
 * The JSON-RPC response to one request id in an MCP server's answer, JSON or
 * SSE (an approved call the sidecar ran itself and must hand back as a value,
 * not as a stream). Undefined when the answer holds no response to that id.
 */
export function jsonRpcResponse(contentType: string, text: string, id: string | number): Record<string, unknown> | undefined {
  const type = contentType.split(';')[0]?.trim().toLowerCase();
  const messages = type === 'text/event-stream' ? sseData(text).flatMap(parse) : parse(text);
  return messages.find((m) => m.id === id && ('result' in m || 'error' in m));
}

/** The data of each event, its data lines joined (the SSE rules: "data:" with or without one space, any line ending). */
function sseData(text: string): string[] {
  const events: string[] = [];
  let data: string[] = [];
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line === '') {
      if (data.length) events.push(data.join('\n'));
      data = [];
    } else if (line === 'data' || line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
  }
  if (data.length) events.push(data.join('\n'));
  return events;
}

function parse(text: string): Record<string, unknown>[] {
  try {
    const v: unknown = JSON.parse(text);
    const all = Array.isArray(v) ? (v as unknown[]) : [v];
    return all.filter((m): m is Record<string, unknown> => typeof m === 'object' && m !== null);
  } catch {
    return [];
  }
}
