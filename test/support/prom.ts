import { call } from './http.js';

/** Samples of a Prometheus text exposition, keyed `name{a="1",b="2"}` (labels sorted). */
export type Samples = Map<string, number>;

export function parseExposition(text: string): Samples {
  const out: Samples = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels = [...(m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map(([, k, v]) => `${k}="${v}"`).sort();
    out.set(`${m[1]}{${labels.join(',')}}`, Number(m[3]));
  }
  return out;
}

/** The value of one series; 0 when absent (a counter never incremented). */
export function sample(s: Samples, name: string, labels: Record<string, string> = {}): number {
  const key = `${name}{${Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',')}}`;
  return s.get(key) ?? 0;
}

/** Metric family names in the exposition (from # TYPE lines). */
export function familyNames(text: string): Set<string> {
  return new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
}

export async function scrape(adminUrl: string): Promise<{ text: string; samples: Samples; contentType: string }> {
  const res = await call(adminUrl, { path: '/metrics' });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return { text: res.text, samples: parseExposition(res.text), contentType: String(res.headers['content-type'] ?? '') };
}
