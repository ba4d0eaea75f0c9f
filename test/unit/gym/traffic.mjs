// A stand-in harness for the gym tests, run by `polar gym --harness generic` under polar's capture proxy:
// it replays a Codex-, Claude Code- or Pi-shaped session (the recorded first request of that harness, see
// fixtures/samples/harness-requests/) against the proxy the generic profile points it at, sending
// back each answer the way that harness does (Responses output items with reasoning encrypted_content,
// Anthropic content blocks with thinking signatures, Chat messages with tool_calls) with a tool result,
// until the model answers; optionally a Codex-style compaction (summary request, then a fresh history
// holding the summary) and a follow-up user query. Then it applies $GYM_PATCH_B64 to its cwd (the
// instance's repository), so the rollout's grade is real. Plain Node, no dependencies.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const spec = JSON.parse(readFileSync(process.env.GYM_TRAFFIC, 'utf8'));
const key = process.env.OPENAI_API_KEY;

async function post(url, body, headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

const toolOutput = (args) => `ran ${args}\nexit 0`;

const apis = {
  responses: {
    async call(body, kind) {
      const meta = JSON.stringify({ request_kind: kind, thread_id: 'gym-test' });
      return post(
        `${process.env.OPENAI_BASE_URL}/responses`,
        { ...body, stream: false },
        {
          authorization: `Bearer ${key}`,
          'x-codex-turn-metadata': meta,
        },
      );
    },
    history: (body) => body.input,
    setHistory: (body, items) => ({ ...body, input: items }),
    toolCalls: (res) => res.output.filter((o) => o.type === 'function_call'),
    text: (res) =>
      res.output
        .filter((o) => o.type === 'message')
        .flatMap((m) => m.content.map((c) => c.text))
        .join(''),
    // Codex sends its output items back as they came (reasoning with encrypted_content included)
    append: (items, res) => [
      ...items,
      ...res.output,
      ...res.output
        .filter((o) => o.type === 'function_call')
        .map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: toolOutput(c.arguments) })),
    ],
    user: (text) => ({ type: 'message', role: 'user', content: [{ type: 'input_text', text }] }),
  },
  anthropic: {
    async call(body) {
      return post(
        `${process.env.ANTHROPIC_BASE_URL}/v1/messages`,
        { ...body, stream: false },
        {
          'x-api-key': process.env.ANTHROPIC_API_KEY,
          'anthropic-version': '2023-06-01',
        },
      );
    },
    history: (body) => body.messages,
    setHistory: (body, messages) => ({ ...body, messages }),
    toolCalls: (res) => res.content.filter((b) => b.type === 'tool_use'),
    text: (res) =>
      res.content
        .filter((b) => b.type === 'text')
        .map((b) => b.text)
        .join(''),
    append: (messages, res) => {
      const uses = res.content.filter((b) => b.type === 'tool_use');
      const next = [...messages, { role: 'assistant', content: res.content }];
      if (uses.length) {
        next.push({
          role: 'user',
          content: uses.map((u) => ({
            type: 'tool_result',
            tool_use_id: u.id,
            content: toolOutput(JSON.stringify(u.input)),
          })),
        });
      }
      return next;
    },
    user: (text) => ({ role: 'user', content: [{ type: 'text', text }] }),
  },
  chat: {
    async call(body) {
      return post(
        `${process.env.OPENAI_BASE_URL}/chat/completions`,
        { ...body, stream: false },
        {
          authorization: `Bearer ${key}`,
        },
      );
    },
    history: (body) => body.messages,
    setHistory: (body, messages) => ({ ...body, messages }),
    toolCalls: (res) => res.choices[0].message.tool_calls ?? [],
    text: (res) => res.choices[0].message.content ?? '',
    // Pi's openai-completions provider sends the assistant message back without its reasoning
    append: (messages, res) => {
      const m = res.choices[0].message;
      const next = [
        ...messages,
        {
          role: 'assistant',
          content: m.content ?? '',
          ...(m.tool_calls ? { tool_calls: m.tool_calls } : {}),
        },
      ];
      for (const c of m.tool_calls ?? [])
        next.push({ role: 'tool', tool_call_id: c.id, content: toolOutput(c.function.arguments) });
      return next;
    },
    user: (text) => ({ role: 'user', content: text }),
  },
};

const api = apis[spec.api];
let body = spec.body;
let compacted = !spec.compaction;
let followed = !spec.followUp;
for (let step = 0; step < 12; step++) {
  const res = await api.call(body, 'turn');
  const calls = api.toolCalls(res);
  body = api.setHistory(body, api.append(api.history(body), res));
  if (calls.length > 0) continue;
  if (!compacted) {
    // Codex's local compaction: ask for a handoff summary, then restart from a history holding it
    compacted = true;
    const ask = api.setHistory(body, [...api.history(body), api.user(spec.compaction)]);
    const summary = api.text(await api.call(ask, 'compaction'));
    const head = api.history(spec.body);
    body = api.setHistory(body, [
      ...head.slice(0, spec.keepItems ?? head.length),
      api.user(`Summary of earlier work:\n${summary}`),
    ]);
    continue;
  }
  if (!followed) {
    followed = true;
    body = api.setHistory(body, [...api.history(body), api.user(spec.followUp)]);
    continue;
  }
  process.stdout.write(`${api.text(res)}\n`);
  break;
}
if (process.env.GYM_PATCH_B64) {
  execFileSync('git', ['apply'], { input: Buffer.from(process.env.GYM_PATCH_B64, 'base64') });
}
