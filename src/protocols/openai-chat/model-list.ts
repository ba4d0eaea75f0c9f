/** GET /v1/models in the OpenAI shape (shared by Chat Completions and Responses clients). */
export function renderModelList(model: string): unknown {
  const created = Math.floor(Date.now() / 1000);
  return { object: 'list', data: [{ id: model, object: 'model', created, owned_by: 'polar' }] };
}
