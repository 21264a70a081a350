import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';

/**
 * Calls `onChange` (debounced) when the policy file may have changed. The
 * directory is watched, not the file: a Kubernetes ConfigMap mount replaces
 * the file by swapping the `..data` symlink, which a watch on the file itself
 * (its old inode) would never see. Spurious calls are harmless: the reload
 * compares hashes.
 */
export function watchPolicyFile(file: string, onChange: () => void, debounceMs = 100): { close(): void } {
  let timer: NodeJS.Timeout | undefined;
  const name = basename(file);
  const fire = (): void => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(onChange, debounceMs);
    timer.unref();
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dirname(file), (_event, changed) => {
      // ..data and ..<timestamp> are the ConfigMap swap; the file itself for editors and `cp`.
      if (!changed || changed === name || changed.startsWith('..')) fire();
    });
    watcher.unref();
    watcher.on('error', () => undefined); // the directory went away: SIGHUP still reloads
  } catch {
    watcher = undefined; // no inotify here: SIGHUP still reloads
  }
  return {
    close() {
      if (timer) clearTimeout(timer);
      watcher?.close();
    },
  };
}
