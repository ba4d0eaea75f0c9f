/**
 * Synthetic append-only capture sessions for the capture-format tests and benchmarks: one harness
 * conversation (OpenAI chat wire API, as Pi and Qwen Code send it) growing call by call, with the
 * branches real sessions have: a compaction (a new chain from a summary), a subagent (its own system
 * prompt, interleaved), a retry (the same request again), a divergence (the template re-rendered the
 * last turn, so the prompt keeps only part of what was sampled), a failed call and a text-only call.
 * Records are built as the proxy's recorder builds them (src/capture/call-record.ts): harness body,
 * canonical request, backend request with its message pointers, prompt and completion ids.
 */
import type { CallRecord, SessionEndRecord, SessionRecord } from '../../src/capture/record.ts';
import { seededRandom } from '../../src/util/random.ts';

export type Step = 'extend' | 'compaction' | 'subagent' | 'retry' | 'diverge' | 'error' | 'text-only';

export interface SessionShape {
  id: string;
  steps: readonly Step[];
  seed: number;
  /** new prompt ids per turn (tool output and template glue), and sampled ids per call */
  newIds: number;
  completionIds: number;
  /** characters of text per new message */
  textChars: number;
  /** the system prompt's length in ids */
  systemIds?: number;
}

interface Chain {
  system: string;
  messages: Array<Record<string, unknown>>;
  prompt: number[];
  completion: number[];
  /** the next call's request messages (the last call's, for a retry) */
  request: Array<Record<string, unknown>>;
}

const T = '2026-01-01T00:00:00.000Z';
const EOT = 151645;
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'bash',
      description: 'Run a shell command',
      parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    },
  },
];

export function sessionRecord(id: string): SessionRecord {
  return {
    v: 1,
    type: 'session',
    id,
    harness: 'pi',
    argv: ['pi', '-p', 'fix it'],
    cwd: '/work',
    started_at: T,
    polar_version: '0.1.0',
    backend: { kind: 'vllm', url: 'http://127.0.0.1:8000/v1', token_exact: true },
    model: 'Qwen/Qwen3-4B',
    task_id: 'task-1',
    sample: 0,
    meta: {},
  };
}

export function sessionEndRecord(id: string, calls: number): SessionEndRecord {
  return {
    v: 1,
    type: 'session_end',
    session: id,
    ended_at: T,
    duration_ms: 1000,
    exit_code: 0,
    signal: null,
    calls,
    errors: 0,
    status: 'completed',
  };
}

/** The call records of one session, in the order they would be written. */
export function syntheticCalls(shape: SessionShape): CallRecord[] {
  const rand = seededRandom(shape.seed);
  const ids = (n: number) => Array.from({ length: n }, () => (rand() * 150000) | 0);
  const text = (n: number) => {
    let s = '';
    while (s.length < n) s += `${((rand() * 1e9) | 0).toString(36)} `;
    return s.slice(0, n);
  };
  const newChain = (system: string): Chain => {
    const messages = [
      { role: 'system', content: system },
      { role: 'user', content: text(shape.textChars) },
    ];
    const prompt = ids(shape.systemIds ?? shape.newIds * 2);
    return { system, messages, prompt, completion: [], request: messages };
  };
  const chains: Chain[] = [newChain(`You are a coding agent. ${text(200)}`)];
  let active = 0;
  const out: CallRecord[] = [];
  let seq = 0;
  const call = (chain: Chain, opts: { error?: boolean; textOnly?: boolean } = {}) => {
    const completion = [...ids(shape.completionIds - 1), EOT];
    const answer = text(Math.max(16, shape.textChars >> 2));
    const record = callRecord(shape.id, seq++, chain.request, chain.prompt, completion, answer, opts);
    out.push(record);
    if (!opts.error) chain.completion = completion;
    if (!opts.error) chain.messages = [...chain.request, { role: 'assistant', content: answer }];
  };
  call(chains[0]!);
  for (const step of shape.steps) {
    let chain = chains[active]!;
    switch (step) {
      case 'compaction':
        chains[active] = chain = newChain(`Summarise the conversation. ${text(100)}`);
        break;
      case 'subagent':
        if (chains.length < 3) chains.push(newChain(`You are a subagent. ${text(150)}`));
        active = (active + 1) % chains.length;
        chain = chains[active]!;
        if (chain.completion.length === 0) break;
        extend(chain, chain.completion);
        break;
      case 'retry':
        break;
      case 'diverge':
        // the template re-rendered the last turn: only part of what was sampled is in the prompt
        extend(chain, chain.completion.slice(0, chain.completion.length >> 1).concat(ids(3)));
        break;
      default:
        extend(chain, chain.completion);
    }
    call(chain, { error: step === 'error', textOnly: step === 'text-only' });
  }
  return out;

  function extend(chain: Chain, sampled: number[]): void {
    chain.prompt = [...chain.prompt, ...sampled, ...ids(shape.newIds)];
    chain.request = [
      ...chain.messages,
      { role: 'tool', tool_call_id: `call_${seq}`, content: text(shape.textChars) },
    ];
  }

  function callRecord(
    session: string,
    n: number,
    messages: Array<Record<string, unknown>>,
    prompt: number[],
    completion: number[],
    answer: string,
    opts: { error?: boolean; textOnly?: boolean },
  ): CallRecord {
    const body = { model: 'qwen', stream: true, messages, tools: TOOLS };
    const canonical = {
      model: 'Qwen/Qwen3-4B',
      messages: messages.map((m) => ({ role: m.role, content: m.content, toolCallId: m.tool_call_id })),
      tools: [
        { name: 'bash', description: 'Run a shell command', parameters: TOOLS[0]!.function.parameters },
      ],
      stream: true,
    };
    const failed = opts.error === true;
    const exact = !failed && !opts.textOnly;
    return {
      v: 1,
      type: 'call',
      id: `call_${session}_${n}`,
      session,
      seq: n,
      api: 'openai-chat',
      harness: 'pi',
      stream: true,
      started_at: T,
      ended_at: T,
      timings: { ttfb_ms: 12.5, backend_ms: 800, total_ms: 810 },
      request: {
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json', authorization: '[redacted]' },
        body,
      },
      response: failed
        ? { status: 502, body: { error: { message: 'backend down', type: 'server_error' } } }
        : {
            status: 200,
            body: { id: `chatcmpl-${n}`, choices: [{ message: { role: 'assistant', content: answer } }] },
          },
      canonical_request: canonical,
      canonical_response: failed
        ? null
        : {
            id: `r${n}`,
            model: 'Qwen/Qwen3-4B',
            content: answer,
            reasoning: '',
            toolCalls: [],
            finishReason: 'stop',
          },
      backend_request: {
        url: 'http://127.0.0.1:8000/v1/chat/completions',
        body: {
          model: 'Qwen/Qwen3-4B',
          messages: '<canonical_request.messages>',
          tools: '<canonical_request.tools>',
          return_token_ids: true,
          logprobs: true,
        },
      },
      prompt_token_ids: exact ? prompt : null,
      completion_token_ids: exact ? completion : null,
      completion_logprobs: exact ? completion.map((_, i) => -((i % 7) / 8)) : null,
      finish_reason: failed ? 'error' : 'stop',
      usage: failed ? null : { prompt_tokens: prompt.length, completion_tokens: completion.length },
      token_exact: exact,
      warnings: [],
      harness_meta: {},
      error: failed ? { kind: 'backend_error', message: 'backend down', status: 502 } : null,
    };
  }
}
