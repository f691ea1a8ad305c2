import { useState } from 'preact/hooks';

async function copy(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

/** Copies `text` to the clipboard and says whether it did (a failure asks to copy by hand). */
export function CopyButton({ text, what }: { text: string; what: string }) {
  const [done, setDone] = useState<string | null>(null);
  return (
    <>
      <button type="button" onClick={async () => setDone((await copy(text)) ? `${what} copied` : 'Copy failed: select the text and copy it')}>
        Copy {what}
      </button>
      <span role="status" class="muted">{done ?? ''}</span>
    </>
  );
}
