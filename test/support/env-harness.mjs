// A harness stand-in that shows what a harness sees of its environment, the way a model-run `env` tool
// call would: it prints every variable as JSON on stdout and sends the same text to the model (through
// the generic profile's OPENAI_BASE_URL / OPENAI_API_KEY), so it lands in the capture if anything leaks.
const env = JSON.stringify(process.env);
console.log(env);
const r = await fetch(`${process.env.OPENAI_BASE_URL}/chat/completions`, {
  method: 'POST',
  headers: { authorization: `Bearer ${process.env.OPENAI_API_KEY}`, 'content-type': 'application/json' },
  body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: `my environment: ${env}` }] }),
});
if (!r.ok) process.exit(2);
await r.json();
