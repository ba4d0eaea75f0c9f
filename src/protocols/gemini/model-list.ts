/** GET /v1beta/models in the Gemini shape (ai.google.dev/api/models#method:-models.list). */
import { GEMINI_METHODS } from './gemini-api.ts';

export function renderModelList(model: string): unknown {
  return {
    models: [
      {
        name: `models/${model}`,
        displayName: model,
        description: 'the model polar serves',
        supportedGenerationMethods: [...GEMINI_METHODS],
      },
    ],
  };
}
