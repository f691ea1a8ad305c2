import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, bodyOf, isRoleRefusal, messageOf } from '../api/client';
import { Confirm } from '../components/Confirm';
import { FieldError } from '../components/FieldError';
import { PagedTable } from '../components/ListTable';
import { NEEDS } from '../fleet';
import { dateTime } from '../format';
import { useCursorPages, type CursorPage } from '../hooks/useCursorPages';
import { useFleet } from '../hooks/useFleet';
import {
  DEFAULT_ROLLOUT_FORM,
  EMPTY_FIRMWARE_FORM,
  firmwareBody,
  firmwareFieldOf,
  packageStateText,
  rolloutBody,
  imageSha256Hex,
  putImage,
  rolloutFieldOf,
  type Firmware,
  type FirmwareField,
  type FirmwareForm,
  type ImageFacts,
  type RolloutField,
  type RolloutForm,
} from '../firmware';

/** Packages a page of the list. */
const PAGE = 20;
/** How often, and how many times, a pending package is looked at again after its upload (each look has the service check the image). */
const POLL_MS = 1500;
const POLLS = 40;

/** The chosen image: its file (PUT as it is, streamed from disk), name, size and the digest computed here. */
interface ChosenImage extends ImageFacts {
  name: string;
  file: File;
}

/** The upload form: choose a file (its SHA-256 computed in the browser), declare type and version, create the package, PUT the bytes, then watch it become ready or rejected. */
function UploadForm({ onCreated, onChecked }: { onCreated: () => void; onChecked: (f: Firmware) => void }) {
  const { api } = useFleet();
  const [form, setForm] = useState<FirmwareForm>(EMPTY_FIRMWARE_FORM);
  const [image, setImage] = useState<ChosenImage | null>(null);
  /** The percent of the chosen file hashed so far; null when not hashing. */
  const [hashed, setHashed] = useState<number | null>(null);
  const hashing = hashed !== null;
  /** The file chosen last: a slower hash of an earlier choice must not replace its result. */
  const chosen = useRef<File | null>(null);
  const [errors, setErrors] = useState<Partial<Record<FirmwareField, string>>>({});
  const [progress, setProgress] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const fileInput = useRef<HTMLInputElement>(null);

  const choose = async (file: File | null) => {
    chosen.current = file;
    setImage(null);
    setErrors({});
    if (!file) {
      setHashed(null);
      return;
    }
    setHashed(0);
    const current = () => chosen.current === file;
    try {
      const sha256 = await imageSha256Hex(file, (percent) => {
        if (current()) setHashed(percent);
      });
      if (current()) setImage({ name: file.name, file, size: file.size, sha256 });
    } catch (e) {
      if (current()) setErrors({ file: `The file could not be read: ${messageOf(e)}` });
    } finally {
      if (current()) setHashed(null);
    }
  };

  /** Looks at the package until the service has judged its image (each GET checks a pending one). */
  const watch = async (firmwareId: string) => {
    for (let i = 0; i < POLLS; i++) {
      const f = bodyOf(await api.GET('/me/firmware/{firmwareId}', { params: { path: { firmwareId } } }));
      if (f.status !== 'pending') return f;
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
    return null;
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    const { body, errors: local } = firmwareBody(form, image);
    if (!body || !image) {
      setErrors(local);
      setTimeout(() => document.querySelector<HTMLElement>('form.firmware [aria-invalid="true"]')?.focus());
      return;
    }
    setErrors({});
    setBusy(true);
    try {
      setProgress('Creating the package…');
      const created = bodyOf(await api.POST('/me/firmware', { body }));
      const { uploadUrl, ...pkg } = created;
      onCreated();
      const uploading = (percent: number) => setProgress(`Uploading ${image.name} (${image.size} bytes): ${percent}%…`);
      uploading(0);
      await putImage(uploadUrl, image.file, uploading);
      setProgress('Uploaded: the service is checking the image…');
      const judged = await watch(pkg.firmwareId);
      if (judged) {
        onChecked(judged);
        setProgress(judged.status === 'ready' ? `${judged.version} for ${judged.deviceType} is ready.` : `Rejected: ${judged.reason ?? 'the image did not match'}.`);
      } else setProgress('Still pending: refresh the list in a moment.');
      setForm(EMPTY_FIRMWARE_FORM);
      setImage(null);
      chosen.current = null;
      if (fileInput.current) fileInput.current.value = '';
    } catch (err) {
      setProgress(null);
      const field = err instanceof ApiError ? firmwareFieldOf(err.field) : null;
      setErrors(field ? { [field]: messageOf(err) } : { form: messageOf(err) });
      setTimeout(() => document.querySelector<HTMLElement>('form.firmware [aria-invalid="true"], form.firmware .error')?.focus());
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="firmware" onSubmit={submit} noValidate>
      {errors.form && (
        <p class="error" role="alert" tabIndex={-1}>
          {errors.form}
        </p>
      )}
      <div class="field wide">
        <label for="firmware-file">Image file</label>
        <input id="firmware-file" type="file" ref={fileInput} aria-invalid={Boolean(errors.file)} aria-describedby={['firmware-file-hint', errors.file ? 'firmware-file-error' : ''].filter(Boolean).join(' ')} onChange={(e) => void choose(e.currentTarget.files?.[0] ?? null)} />
        <span id="firmware-file-hint" class="hint" role="status">
          {hashing ? `Computing its SHA-256… ${hashed}%` : image ? (
            <>
              {image.size} bytes, SHA-256 <span class="mono" data-sha256>{image.sha256}</span> (computed in this browser)
            </>
          ) : (
            'at most 256 MiB; its SHA-256 is computed here and checked by the service after the upload'
          )}
        </span>
        <FieldError id="firmware-file-error" message={errors.file} />
      </div>
      <div class="field">
        <label for="firmware-type">Device type</label>
        <input id="firmware-type" value={form.deviceType} aria-invalid={Boolean(errors.deviceType)} aria-describedby={errors.deviceType ? 'firmware-type-error' : undefined} onInput={(e) => setForm({ ...form, deviceType: e.currentTarget.value })} />
        <FieldError id="firmware-type-error" message={errors.deviceType} />
      </div>
      <div class="field">
        <label for="firmware-version">Version</label>
        <input id="firmware-version" value={form.version} placeholder="2.1.0" aria-invalid={Boolean(errors.version)} aria-describedby={errors.version ? 'firmware-version-error' : undefined} onInput={(e) => setForm({ ...form, version: e.currentTarget.value })} />
        <FieldError id="firmware-version-error" message={errors.version} />
      </div>
      <div class="field wide">
        <label for="firmware-signature">Signature (base64, when the type has a signing key)</label>
        <input id="firmware-signature" class="mono" value={form.signature} aria-invalid={Boolean(errors.signature)} aria-describedby={errors.signature ? 'firmware-signature-error' : undefined} onInput={(e) => setForm({ ...form, signature: e.currentTarget.value })} />
        <FieldError id="firmware-signature-error" message={errors.signature} />
      </div>
      <button type="submit" class="primary" disabled={busy || hashing}>
        Upload firmware
      </button>
      {progress && (
        <p class="notice" role="status" data-upload-progress>
          {progress}
        </p>
      )}
    </form>
  );
}

/** The staged-rollout form: a ready package, a target, the stage plan and its rules. */
function StartRollout({ ready }: { ready: Firmware[] }) {
  const { api, href } = useFleet();
  const [form, setForm] = useState<RolloutForm>({ ...DEFAULT_ROLLOUT_FORM, firmwareId: ready[0]?.firmwareId ?? '', target: ready[0]?.deviceType ?? '' });
  const [errors, setErrors] = useState<Partial<Record<RolloutField, string>>>({});
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (!form.firmwareId && ready[0]) setForm((f) => ({ ...f, firmwareId: ready[0].firmwareId, target: f.target || ready[0].deviceType }));
  }, [ready.map((f) => f.firmwareId).join()]);

  const submit = async (e: Event) => {
    e.preventDefault();
    const { body, errors: local } = rolloutBody(form);
    if (!body) {
      setErrors(local);
      setTimeout(() => document.querySelector<HTMLElement>('form.rollout [aria-invalid="true"]')?.focus());
      return;
    }
    setErrors({});
    setBusy(true);
    try {
      const { rollout } = bodyOf(await api.POST('/me/rollouts', { body }));
      location.hash = href(`/rollouts/${encodeURIComponent(rollout.rolloutId)}`);
    } catch (err) {
      const field = err instanceof ApiError ? rolloutFieldOf(err.field) : null;
      setErrors(field ? { [field]: messageOf(err) } : { form: messageOf(err) });
      setTimeout(() => document.querySelector<HTMLElement>('form.rollout [aria-invalid="true"], form.rollout .error')?.focus());
    } finally {
      setBusy(false);
    }
  };

  const field = (name: RolloutField, label: string, key: keyof RolloutForm, hint?: string) => (
    <div class="field">
      <label for={`rollout-${name}`}>{label}</label>
      <input id={`rollout-${name}`} inputMode="numeric" value={form[key]} aria-invalid={Boolean(errors[name])} aria-describedby={[hint ? `rollout-${name}-hint` : '', errors[name] ? `rollout-${name}-error` : ''].filter(Boolean).join(' ') || undefined} onInput={(e) => setForm({ ...form, [key]: e.currentTarget.value })} />
      {hint && (
        <span id={`rollout-${name}-hint`} class="hint">
          {hint}
        </span>
      )}
      <FieldError id={`rollout-${name}-error`} message={errors[name]} />
    </div>
  );

  if (ready.length === 0) return <p class="muted">No ready package yet: upload one above, and once the service has checked it, it can be rolled out.</p>;
  return (
    <form class="rollout" onSubmit={submit} noValidate>
      {errors.form && (
        <p class="error" role="alert" tabIndex={-1}>
          {errors.form}
        </p>
      )}
      <div class="field wide">
        <label for="rollout-firmwareId">Package</label>
        <select id="rollout-firmwareId" value={form.firmwareId} aria-invalid={Boolean(errors.firmwareId)} aria-describedby={errors.firmwareId ? 'rollout-firmwareId-error' : undefined} onChange={(e) => setForm({ ...form, firmwareId: e.currentTarget.value })}>
          {ready.map((f) => (
            <option key={f.firmwareId} value={f.firmwareId}>
              {f.deviceType} {f.version} ({f.firmwareId})
            </option>
          ))}
        </select>
        <FieldError id="rollout-firmwareId-error" message={errors.firmwareId} />
      </div>
      <fieldset class="field group">
        <legend>Target</legend>
        <div class="field inline">
          <input type="radio" name="rollout-target-kind" id="rollout-target-type" checked={form.targetKind === 'type'} onChange={() => setForm({ ...form, targetKind: 'type' })} />
          <label for="rollout-target-type">Devices of a type</label>
        </div>
        <div class="field inline">
          <input type="radio" name="rollout-target-kind" id="rollout-target-tag" checked={form.targetKind === 'tag'} onChange={() => setForm({ ...form, targetKind: 'tag' })} />
          <label for="rollout-target-tag">Devices with a tag (only those of the package's type are offered it)</label>
        </div>
        <div class="field">
          <label for="rollout-target">{form.targetKind === 'tag' ? 'Tag' : 'Device type'}</label>
          <input id="rollout-target" value={form.target} aria-invalid={Boolean(errors.target)} aria-describedby={errors.target ? 'rollout-target-error' : undefined} onInput={(e) => setForm({ ...form, target: e.currentTarget.value })} />
          <FieldError id="rollout-target-error" message={errors.target} />
        </div>
      </fieldset>
      {field('stages', 'Stages (cumulative % of the target)', 'stages', 'increasing, the last 100; a device’s stage follows from its id')}
      {field('soakSeconds', 'Soak (seconds)', 'soakSeconds', 'after a stage meets the success share, before the next opens')}
      {field('healthyCheckIns', 'Healthy check-ins', 'healthyCheckIns', 'after the new version runs, before a device counts as succeeded')}
      {field('successPercent', 'Success share (%)', 'successPercent')}
      <fieldset class="field group">
        <legend>Pause the rollout when</legend>
        {field('failurePercent', 'Failed (% of finished devices of a stage)', 'failurePercent')}
        {field('minFinished', 'of at least (finished devices)', 'minFinished')}
      </fieldset>
      <fieldset class="field group" aria-describedby={errors.window ? 'rollout-window-error' : undefined}>
        <legend>Maintenance window (optional, UTC hours)</legend>
        <div class="field">
          <label for="rollout-window-start">From hour</label>
          <input id="rollout-window-start" inputMode="numeric" value={form.windowStart} aria-invalid={Boolean(errors.window)} onInput={(e) => setForm({ ...form, windowStart: e.currentTarget.value })} />
        </div>
        <div class="field">
          <label for="rollout-window-end">Until hour</label>
          <input id="rollout-window-end" inputMode="numeric" value={form.windowEnd} aria-invalid={Boolean(errors.window)} onInput={(e) => setForm({ ...form, windowEnd: e.currentTarget.value })} />
        </div>
        <FieldError id="rollout-window-error" message={errors.window} />
      </fieldset>
      <button type="submit" class="primary" disabled={busy}>
        Start rollout
      </button>
    </form>
  );
}

/**
 * The fleet's firmware (issue 40): every member reads the packages; a role that manages uploads
 * one (its SHA-256 computed in the browser, checked by the service), deletes one, and starts a
 * staged rollout of a ready one.
 */
export function FirmwarePage() {
  const { api, can, org, href } = useFleet();
  const manage = can(NEEDS.manage);
  const [notice, setNotice] = useState<{ text: string; error: boolean } | null>(null);
  const [refresh, setRefresh] = useState(0);
  const readPage = async (cursor: string | null): Promise<CursorPage<Firmware>> => {
    const page = bodyOf(await api.GET('/me/firmware', { params: { query: { limit: PAGE, cursor: cursor ?? undefined } } }));
    return { items: page.firmware, cursor: page.cursor ?? null };
  };
  const list = useCursorPages(readPage, `${org?.orgId ?? 'me'}:${refresh}`, { idOf: (f) => f.firmwareId });
  const ready = (list.items ?? []).filter((f) => f.status === 'ready');

  const remove = async (f: Firmware) => {
    setNotice(null);
    try {
      await api.DELETE('/me/firmware/{firmwareId}', { params: { path: { firmwareId: f.firmwareId } } });
      setNotice({ text: `Deleted ${f.deviceType} ${f.version}.`, error: false });
    } catch (err) {
      if (err instanceof ApiError && err.code === 'firmware_in_use') setNotice({ text: `${f.version} is used by a running rollout: cancel it first.`, error: true });
      else setNotice({ text: isRoleRefusal(err) ? `Refused: ${messageOf(err)}` : messageOf(err), error: true });
    }
    setRefresh((n) => n + 1);
  };

  return (
    <section>
      <h1 tabIndex={-1}>Firmware</h1>
      <p class="muted">
        A package is an image the service itself has read and checked against its declared size and SHA-256 (and signature, where the device type has a signing key). A staged rollout offers a ready package to the devices of a tag or type, stage by stage. <a href={href('/rollouts')}>All rollouts</a>
      </p>
      {notice && (
        <p class={notice.error ? 'error' : 'notice'} role={notice.error ? 'alert' : 'status'} data-notice>
          {notice.text}
        </p>
      )}
      <PagedTable
        list={list}
        loading="Loading packages…"
        empty="No package yet."
        more="Older packages"
        tableClass="packages"
        caption="Firmware packages, newest first"
        columns={[{ label: 'Version' }, { label: 'Device type' }, { label: 'State' }, { label: 'Size', num: true }, { label: 'SHA-256' }, { label: 'Created' }]}
        actions={manage}
        row={(f) => (
          <tr key={f.firmwareId} data-firmware={f.firmwareId} data-status={f.status}>
            <th scope="row">
              {f.version}
              <div class="muted mono">{f.firmwareId}</div>
            </th>
            <td>{f.deviceType}</td>
            <td>
              <span class={`badge firmware-${f.status}`}>{f.status}</span>
              <div class="muted">{packageStateText(f)}</div>
            </td>
            <td class="num">{f.size}</td>
            <td class="mono hash">{f.sha256}</td>
            <td>{dateTime(f.createdAt)}</td>
            {manage && (
              <td>
                <Confirm label="Delete…" danger question={`Delete ${f.deviceType} ${f.version}? Its image is deleted too.`} confirmLabel="Delete package" onConfirm={() => remove(f)} />
              </td>
            )}
          </tr>
        )}
      />
      {!manage && <p class="muted">An admin of {org?.name ?? 'the organization'} uploads packages and starts rollouts; your role is {org?.role}, which reads them.</p>}
      {manage && (
        <>
          <h2>Upload firmware</h2>
          <UploadForm onCreated={() => setRefresh((n) => n + 1)} onChecked={(f) => list.replace(f)} />
          <h2>Start a staged rollout</h2>
          <StartRollout ready={ready} />
        </>
      )}
    </section>
  );
}
