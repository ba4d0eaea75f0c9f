// See package.json: Qwen Code catches this and runs without clipboard images.
throw new Error('@teddyzhu/clipboard is not installed (polar dev stand-in)');
