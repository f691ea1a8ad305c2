import { useEffect, useState } from 'preact/hooks';
import { ApiError, bodyOf, fieldOf, isRoleRefusal, messageOf, type Schemas } from '../api/client';
import { useFleet } from '../hooks/useFleet';
import { NEEDS } from '../fleet';
import { dateTime } from '../format';
import { FieldError } from './FieldError';

/** The device twin on the device page: desired and reported configuration with their delta
 * and versions (AP-03's answer), the desired state edited with `If-Match` on its version
 * (AP-T1), a command sent (AP-T2) and the commands with their state (AP-T3). The forms only
 * for a role that may use them (an organization's operator and above). */
export function TwinPanel({ deviceId, twin, onChanged }: { deviceId: string; twin?: Schemas['Twin']; onChanged: () => Promise<void> }) {
  const { api, can } = useFleet();
  const operate = can(NEEDS.operate);
  const [desired, setDesired] = useState(() => JSON.stringify(twin?.desired ?? {}, null, 2));
  const [command, setCommand] = useState({ name: '', parameters: '{}', expires: '3600' });
  const [commands, setCommands] = useState<Schemas['Command'][] | null>(null);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [notice, setNotice] = useState<string | null>(null);
  const [refused, setRefused] = useState<string | null>(null);

  const loadCommands = async () => {
    try {
      setCommands(bodyOf(await api.GET('/me/devices/{deviceId}/commands', { params: { path: { deviceId } } })).commands);
    } catch (e) {
      setErrors({ commands: messageOf(e) });
    }
  };

  useEffect(() => {
    void loadCommands();
  }, [deviceId]);

  useEffect(() => {
    setDesired(JSON.stringify(twin?.desired ?? {}, null, 2));
  }, [twin?.desiredVersion]);

  const saveDesired = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    let document: Schemas['TwinDocument'];
    try {
      document = JSON.parse(desired);
    } catch {
      setErrors({ desired: 'Enter a JSON object, e.g. {"reportIntervalSeconds": 300}.' });
      return;
    }
    try {
      await api.PUT('/me/devices/{deviceId}/desired', {
        params: { path: { deviceId }, header: { 'If-Match': String(twin?.desiredVersion ?? 0) } },
        body: { desired: document },
      });
      setNotice('Desired state saved: the device gets it with its next request.');
      await onChanged();
    } catch (err) {
      const field = fieldOf(err);
      if (isRoleRefusal(err)) setRefused(messageOf(err));
      else if (err instanceof ApiError && err.status === 412) {
        setErrors({ desired: 'Someone changed the desired state meanwhile; the form now shows theirs. Apply your change again.' });
        await onChanged();
      } else setErrors({ desired: field && field !== 'desired' ? `${field}: ${messageOf(err)}` : messageOf(err) });
    }
  };

  const sendCommand = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    let parameters: Schemas['Command']['parameters'];
    try {
      parameters = JSON.parse(command.parameters || '{}');
    } catch {
      setErrors({ parameters: 'Enter a JSON object, e.g. {"delaySeconds": 5}.' });
      return;
    }
    try {
      const answer = bodyOf(
        await api.POST('/me/devices/{deviceId}/commands', {
          params: { path: { deviceId } },
          body: { name: command.name, parameters, expiresInSeconds: Number(command.expires) },
        }),
      );
      setNotice(`Command ${answer.command.commandId} queued.`);
      setCommand({ ...command, name: '' });
      await loadCommands();
      await onChanged();
    } catch (err) {
      const field = fieldOf(err);
      if (isRoleRefusal(err)) setRefused(messageOf(err));
      else if (field && ['name', 'parameters', 'expiresInSeconds'].includes(field)) setErrors({ [field === 'expiresInSeconds' ? 'expires' : field]: messageOf(err) });
      else setErrors({ command: messageOf(err) });
    }
  };

  return (
    <div class="twin">
      <h2>Configuration and commands</h2>
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      {refused && (
        <p class="error" role="alert" id="twin-refused">
          Refused: {refused}
        </p>
      )}
      <p id="twin-versions">
        Desired version {twin?.desiredVersion ?? 0}, reported {twin?.reportedVersion ?? 0}: {twin && !twin.inSync ? 'waiting for the device' : 'in sync'}.
      </p>
      {twin?.reported && (
        <>
          <h3>Reported by the device</h3>
          <pre id="twin-reported">{JSON.stringify(twin.reported, null, 2)}</pre>
        </>
      )}
      {twin?.delta && Object.keys(twin.delta).length > 0 && (
        <>
          <h3>Not applied yet</h3>
          <pre id="twin-delta">{JSON.stringify(twin.delta, null, 2)}</pre>
        </>
      )}
      {!operate && (
        <>
          <h3>Desired state</h3>
          <pre id="twin-desired-view">{JSON.stringify(twin?.desired ?? {}, null, 2)}</pre>
        </>
      )}
      {operate && (
      <>
      <form class="edit" onSubmit={saveDesired} noValidate>
        <div class="field">
          <label for="twin-desired">Desired state (JSON)</label>
          <textarea id="twin-desired" rows={6} value={desired} aria-invalid={Boolean(errors.desired)} aria-describedby={errors.desired ? 'twin-desired-error' : undefined} onInput={(e) => setDesired(e.currentTarget.value)} />
          <FieldError id="twin-desired-error" message={errors.desired} />
        </div>
        <button type="submit" class="primary">
          Save desired state
        </button>
      </form>
      <form class="edit" onSubmit={sendCommand} noValidate>
        {errors.command && (
          <p class="error" role="alert">
            {errors.command}
          </p>
        )}
        <div class="field">
          <label for="command-name">Command</label>
          <input id="command-name" value={command.name} aria-invalid={Boolean(errors.name)} aria-describedby={errors.name ? 'command-name-error' : undefined} onInput={(e) => setCommand({ ...command, name: e.currentTarget.value })} />
          <FieldError id="command-name-error" message={errors.name} />
        </div>
        <div class="field">
          <label for="command-parameters">Parameters (JSON)</label>
          <input id="command-parameters" value={command.parameters} aria-invalid={Boolean(errors.parameters)} aria-describedby={errors.parameters ? 'command-parameters-error' : undefined} onInput={(e) => setCommand({ ...command, parameters: e.currentTarget.value })} />
          <FieldError id="command-parameters-error" message={errors.parameters} />
        </div>
        <div class="field">
          <label for="command-expires">Expires after (seconds)</label>
          <input id="command-expires" inputMode="numeric" value={command.expires} aria-invalid={Boolean(errors.expires)} aria-describedby={errors.expires ? 'command-expires-error' : undefined} onInput={(e) => setCommand({ ...command, expires: e.currentTarget.value })} />
          <FieldError id="command-expires-error" message={errors.expires} />
        </div>
        <button type="submit" class="primary">
          Send command
        </button>
      </form>
      </>
      )}
      {commands && commands.length > 0 && (
        <table id="commands">
          <caption>Commands, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Command</th>
              <th scope="col">State</th>
              <th scope="col">Queued</th>
            </tr>
          </thead>
          <tbody>
            {commands.map((c) => (
              <tr key={c.commandId}>
                <td>{c.commandId}</td>
                <td>{c.name}</td>
                <td class={`command-${c.status}`}>{c.status}</td>
                <td>{dateTime(c.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {errors.commands && <p class="error">{errors.commands}</p>}
    </div>
  );
}
