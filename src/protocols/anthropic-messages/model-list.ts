/** GET /v1/models in the Anthropic shape (https://docs.anthropic.com/en/api/models-list). */
export function renderModelList(model: string): unknown {
  return {
    data: [{ type: 'model', id: model, display_name: model, created_at: new Date().toISOString() }],
    has_more: false,
    first_id: model,
    last_id: model,
  };
}
