/**
 * The judge: asks an OpenAI-compatible chat completions server (through polar's one HTTP client) for a
 * verdict on one rollout (single mode) or on a task's samples together (group mode, RULER), records
 * every call in the run folder's judge.jsonl (src/rollout/judge/records.ts; never a capture, never trained on)
 * and answers a question it has already answered in this run folder from there, by content hash (rubric,
 * transcripts, patches, model and mode), so a --resume does not ask again. An answer that cannot be
 * read is asked once more, saying what was wrong; a server that is down, times out or answers what
 * cannot be read twice is a JudgeFailure: the sample is an infrastructure error, never a 0.
 */
import { createHash } from 'node:crypto';
import { request, timeLimit, trimSlash } from '../../http/client.ts';
import { redactUrl } from '../../util/redact.ts';
import { type ChatMessage, groupMessages, readGroup, readSingle, singleMessages } from './prompt.ts';
import { type JudgeAttempt, type JudgeRecord, JudgeRecords } from './records.ts';
import { type JudgeConfig, JudgeFailure, type JudgeSample, type JudgeScore } from './types.ts';

/** The chat completions URL of a server given as its /v1 base or as that URL itself. */
export function chatCompletionsUrl(url: string): string {
  const base = trimSlash(url);
  return base.endsWith('/chat/completions') ? base : `${base}/chat/completions`;
}

/** The content hash a verdict is kept under: everything that decides it. */
export function judgeKey(
  config: Pick<JudgeConfig, 'rubric' | 'model' | 'mode'>,
  samples: JudgeSample[],
): string {
  const hash = createHash('sha256');
  hash.update(JSON.stringify({ rubric: config.rubric, model: config.model, mode: config.mode }));
  for (const s of samples) hash.update(JSON.stringify([s.task, s.transcript, s.patch]));
  return hash.digest('hex');
}

type Reply = { content: string; status: number } | { problem: string; status: number | null };

export class Judge {
  /** calls made to the server (not counting answers from judge.jsonl) */
  calls = 0;

  private constructor(
    readonly config: JudgeConfig,
    private readonly records: JudgeRecords,
  ) {}

  /** A judge whose records (and cache) are the run folder's judge.jsonl. */
  static async open(config: JudgeConfig, runDir: string): Promise<Judge> {
    return new Judge(config, await JudgeRecords.open(runDir));
  }

  /** One rollout's verdict. */
  async single(sample: JudgeSample, signal?: AbortSignal): Promise<JudgeScore & { cached: boolean }> {
    const [score] = await this.ask([sample], singleMessages(this.config.rubric, sample), signal, (c) => {
      const r = readSingle(c);
      return typeof r === 'string' ? r : [r];
    });
    return score!;
  }

  /** A task's samples ranked together (RULER): one verdict each, in their order. */
  async group(
    samples: JudgeSample[],
    signal?: AbortSignal,
  ): Promise<Array<JudgeScore & { cached: boolean }>> {
    return this.ask(samples, groupMessages(this.config.rubric, samples), signal, (c) =>
      readGroup(c, samples.length),
    );
  }

  private async ask(
    samples: JudgeSample[],
    messages: ChatMessage[],
    signal: AbortSignal | undefined,
    read: (content: string) => Array<{ score: number; reason: string }> | string,
  ): Promise<Array<JudgeScore & { cached: boolean }>> {
    const key = judgeKey(this.config, samples);
    const cached = this.records.cached(key, samples.length);
    if (cached) return cached.map((s, i) => ({ ...s, key: samples[i]!.key, cached: true }));
    const attempts: JudgeAttempt[] = [];
    let conversation = messages;
    let verdicts: Array<{ score: number; reason: string }> | null = null;
    let problem = '';
    for (let attempt = 1; attempt <= 2 && verdicts === null; attempt++) {
      const reply = await this.post(conversation, signal);
      if ('problem' in reply) {
        problem = reply.problem;
        attempts.push({ status: reply.status, content: null, problem });
        continue;
      }
      const read1 = read(reply.content);
      if (typeof read1 !== 'string') {
        verdicts = read1;
        attempts.push({ status: reply.status, content: reply.content, problem: null });
        break;
      }
      problem = `unreadable answer: ${read1}`;
      attempts.push({ status: reply.status, content: reply.content, problem });
      // the second ask says what was wrong with the first answer
      conversation = [
        ...messages,
        { role: 'assistant', content: reply.content },
        {
          role: 'user',
          content: `That answer could not be read (${read1}). Answer again with only the JSON object, in the form asked for.`,
        },
      ];
    }
    const record: JudgeRecord = {
      v: 1,
      type: 'judge_call',
      key,
      mode: this.config.mode,
      model: this.config.model,
      url: redactUrl(chatCompletionsUrl(this.config.url)),
      rubric_file: this.config.rubricFile,
      samples: samples.map((s) => s.key),
      messages: messages.map((m) => ({ ...m })),
      attempts,
      status: verdicts ? 'ok' : 'error',
      scores: verdicts ? verdicts.map((v, i) => ({ key: samples[i]!.key, ...v })) : null,
      error: verdicts ? null : problem,
      at: new Date().toISOString(),
    };
    await this.records.append(record);
    if (!verdicts)
      throw new JudgeFailure(
        `judge ${this.config.model} at ${record.url}: ${problem} (after ${attempts.length} attempts)`,
      );
    return verdicts.map((v, i) => ({ ...v, key: samples[i]!.key, cached: false }));
  }

  /** One chat completions call: the answer's content, or what went wrong. */
  private async post(messages: ChatMessage[], signal: AbortSignal | undefined): Promise<Reply> {
    this.calls++;
    const url = chatCompletionsUrl(this.config.url);
    const body = JSON.stringify({
      model: this.config.model,
      messages: messages.map((m) => ({ ...m })),
      temperature: 0,
      // OpenAI's JSON mode (vLLM and SGLang take it too): the answer is one JSON object
      response_format: { type: 'json_object' },
    });
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.config.apiKey) headers.authorization = `Bearer ${this.config.apiKey}`;
    let status: number | null = null;
    try {
      const res = await request(url, {
        method: 'POST',
        headers,
        body,
        deadline: timeLimit(this.config.timeoutMs, signal),
        release: true,
      });
      status = res.status;
      const text = await res.text();
      if (!res.ok) return { problem: `HTTP ${res.status}: ${text.slice(0, 300)}`, status };
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        return { problem: `the server's reply is not JSON: ${text.slice(0, 200)}`, status };
      }
      const content = (value as { choices?: Array<{ message?: { content?: unknown } }> }).choices?.[0]
        ?.message?.content;
      if (typeof content !== 'string')
        return { problem: 'the reply has no choices[0].message.content (not a chat completion)', status };
      return { content, status };
    } catch (error) {
      const e = error as Error;
      const why =
        e.name === 'TimeoutError'
          ? `no answer within ${this.config.timeoutMs} ms (--judge-timeout)`
          : e.message;
      return { problem: `cannot reach the judge: ${why}`, status };
    }
  }
}
