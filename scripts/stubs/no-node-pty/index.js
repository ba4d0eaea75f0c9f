// See package.json: Gemini CLI loads @lydell/node-pty first and this one only as a fallback.
throw new Error('node-pty is not installed (polar dev stand-in; Gemini CLI uses @lydell/node-pty)');
