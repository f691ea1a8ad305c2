import { useEffect, useRef, useState } from 'preact/hooks';

/**
 * A button that asks before it acts: the question appears in place, focus moves to its
 * confirming button, Escape or Cancel goes back.
 */
export function Confirm({ label, question, confirmLabel, onConfirm, danger }: { label: string; question: string; confirmLabel: string; onConfirm: () => Promise<void> | void; danger?: boolean }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  const opener = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) yes.current?.focus();
  }, [asking]);
  if (!asking)
    return (
      <button type="button" ref={opener} class={danger ? 'danger' : ''} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  const cancel = () => {
    setAsking(false);
    setTimeout(() => opener.current?.focus());
  };
  return (
    <div class="confirm" role="group" aria-label={question} onKeyDown={(e) => e.key === 'Escape' && cancel()}>
      <span>{question}</span>
      <button
        type="button"
        ref={yes}
        class={danger ? 'danger' : 'primary'}
        disabled={busy}
        onClick={async () => {
          setBusy(true);
          try {
            await onConfirm();
          } finally {
            setBusy(false);
            setAsking(false);
          }
        }}
      >
        {confirmLabel}
      </button>
      <button type="button" onClick={cancel}>
        Cancel
      </button>
    </div>
  );
}
