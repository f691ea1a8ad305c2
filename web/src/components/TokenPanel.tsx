import { CopyButton } from './CopyButton';

/** A device token, shown once, with what a device runs to send its first event. */
export function TokenPanel({ deviceId, token, apiBase, note }: { deviceId: string; token: string; apiBase: string; note?: string }) {
  const curl =
    `curl -X POST ${apiBase}/devices/${deviceId}/events \\\n` +
    `  -H 'Authorization: Bearer ${token}' -H 'Content-Type: application/json' \\\n` +
    `  -d "{\\"events\\":[{\\"type\\":\\"temperature\\",\\"value\\":21.5,\\"at\\":\\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\\"}]}"`;
  return (
    <section class="token" aria-labelledby="token-title">
      <h2 id="token-title">Device token for {deviceId}</h2>
      <p>
        <strong>Shown this once:</strong> only its hash is stored. Copy it to the device now.
        {note ? ` ${note}` : ''}
      </p>
      <label for="token-value">Token</label>
      <input id="token-value" class="mono" readOnly value={token} onFocus={(e) => e.currentTarget.select()} />
      <CopyButton text={token} what="token" />
      <h3>Send a first event</h3>
      <pre class="mono" tabIndex={0} aria-label="curl command">{curl}</pre>
      <CopyButton text={curl} what="command" />
    </section>
  );
}
