/** The body of `polar doctor --backend KIND --backend-url URL`: the set-up probe's report, exit 0 when ready. */
import { type BackendFlags, backendOptions } from '../capture/options.ts';
import { EXIT } from '../errors.ts';
import { log } from '../util/log.ts';
import { formatProbeReport, probeBackend } from './probe.ts';
import { waitForBackend } from './wait.ts';

export async function doctorCommand(flags: Record<string, unknown>): Promise<number> {
  const f = flags as BackendFlags & { wait?: boolean; json?: boolean };
  const options = backendOptions(f);
  if (f.wait) {
    await waitForBackend(options, {
      timeoutMs: options.timeoutMs ?? 600_000,
      onWait: (left, url, why) => log.info(`waiting for ${url} (${left} s left): ${why}`),
    });
  }
  const report = await probeBackend(options);
  process.stdout.write(`${f.json ? JSON.stringify(report, null, 2) : formatProbeReport(report)}\n`);
  return report.ok ? EXIT.ok : EXIT.environment;
}
