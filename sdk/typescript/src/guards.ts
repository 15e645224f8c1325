/** Type guards of the hosted SDK. */
import type { ExecResult, Process, ProcessStatus } from './types.js';

const STATUSES: readonly string[] = ['starting', 'running', 'completed', 'failed', 'killed', 'error'];

export function isProcessStatus(v: unknown): v is ProcessStatus {
  return typeof v === 'string' && STATUSES.includes(v);
}

export function isExecResult(v: unknown): v is ExecResult {
  if (typeof v !== 'object' || v === null) return false;
  const r = v as Record<string, unknown>;
  return (
    typeof r.success === 'boolean' &&
    typeof r.exitCode === 'number' &&
    typeof r.stdout === 'string' &&
    typeof r.stderr === 'string' &&
    typeof r.command === 'string'
  );
}

export function isProcess(v: unknown): v is Process {
  if (typeof v !== 'object' || v === null) return false;
  const p = v as Record<string, unknown>;
  return (
    typeof p.id === 'string' &&
    typeof p.command === 'string' &&
    isProcessStatus(p.status) &&
    typeof p.kill === 'function' &&
    typeof p.getStatus === 'function'
  );
}
