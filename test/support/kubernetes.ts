import { Deployment, StatefulSet, DaemonSet, ReplicaSet } from 'kubernetes-models/apps/v1';
import { CronJob, Job } from 'kubernetes-models/batch/v1';
import { ConfigMap, Pod, Service } from 'kubernetes-models/v1';

// The Kubernetes OpenAPI schemas (kubernetes-models), so injector output is checked as the API server would.
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, Pod, ConfigMap, Service,
} as never;

/** Throws when `doc` is not a valid object of its kind. */
export function validateObject(doc: Record<string, unknown>): void {
  const Model = MODELS[String(doc.kind)];
  if (!Model) throw new Error(`no schema for kind ${String(doc.kind)}`);
  new Model(doc as never).validate();
}
