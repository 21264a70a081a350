import type { Route } from '../policy/types.js';
import { matchTemplate } from './template.js';

/** Finds the route for a method and raw path segments. Routes never overlap (checked at load), so the first match is the only one. */
export function matchRoute(
  routes: readonly Route[],
  method: string,
  segments: readonly string[],
): { route: Route; params: Record<string, string> } | undefined {
  for (const route of routes) {
    if (route.method !== method) continue;
    const params = matchTemplate(route.template, segments);
    if (params) return { route, params };
  }
  return undefined;
}
