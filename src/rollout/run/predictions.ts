/** The run's predictions files, in the official harness's format, from its result lines and patches. */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { mkdirPrivate, writeAtomic } from '../../util/private-files.ts';
import { EVAL_FILES, samplePredictionsFile } from './files.ts';
import type { ResultLine } from './report.ts';
import { sampleKey } from './results.ts';
import type { EvalPlan } from './run.ts';

/** predictions.jsonl (sample 0) and, with several samples, predictions/sample-<j>.jsonl. */
export async function writePredictions(
  out: string,
  plan: Pick<EvalPlan, 'samples' | 'instances' | 'agent'>,
  results: Map<string, ResultLine>,
): Promise<void> {
  for (let j = 0; j < plan.samples; j++) {
    const lines: string[] = [];
    for (const instance of plan.instances) {
      const r = results.get(sampleKey(instance.instance_id, j));
      if (!r) continue;
      const patchFile = String(r.patch_file ?? '');
      const patch = patchFile && existsSync(patchFile) ? await readFile(patchFile, 'utf8') : '';
      lines.push(
        JSON.stringify({
          instance_id: instance.instance_id,
          model_name_or_path: plan.agent.modelName,
          model_patch: patch,
        }),
      );
    }
    const body = lines.length ? `${lines.join('\n')}\n` : '';
    if (j === 0) await writeAtomic(join(out, EVAL_FILES.predictions), body);
    if (plan.samples > 1) {
      await mkdirPrivate(join(out, EVAL_FILES.predictionsDir));
      await writeAtomic(join(out, EVAL_FILES.predictionsDir, samplePredictionsFile(j)), body);
    }
  }
}
