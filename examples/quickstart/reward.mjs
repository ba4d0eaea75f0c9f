#!/usr/bin/env node
// The quickstart's reward (examples/quickstart/README.md): a verifier grader (docs/eval.md, "Verifier
// graders") reads the rollout as JSON on stdin (the row, the agent's final message, its patch, ...) and
// prints a number. Here: 1 when the final answer holds the row's `answer` ("tails"), else 0.
let text = '';
for await (const chunk of process.stdin) text += chunk;
const rollout = JSON.parse(text);
console.log(String(rollout.final_message ?? '').includes(rollout.row.answer) ? 1 : 0);
