import { useEffect, useState } from 'preact/hooks';
import { bodyOf, messageOf } from '../api/client';
import { devicePhaseText, type DeviceFirmware as Offer } from '../firmware';
import { ago } from '../format';
import { useFleet } from '../hooks/useFleet';

/**
 * The device's firmware as the last staged rollout's offer knows it
 * (`GET /me/devices/{deviceId}/firmware`): the running version and the update's state. Devices
 * report their version only in a firmware rollout's check-ins, so a device no rollout offered
 * anything has no known version.
 */
export function DeviceFirmware({ deviceId }: { deviceId: string }) {
  const { api, href } = useFleet();
  const [firmware, setFirmware] = useState<Offer | null | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let current = true;
    void (async () => {
      try {
        const answer = bodyOf(await api.GET('/me/devices/{deviceId}/firmware', { params: { path: { deviceId } } }));
        if (current) setFirmware(answer.firmware ?? null);
      } catch (e) {
        if (current) setError(messageOf(e));
      }
    })();
    return () => {
      current = false;
    };
  }, [deviceId]);
  if (error) return <p class="muted">Firmware: {error}</p>;
  if (firmware === undefined) return null;
  if (firmware === null)
    return (
      <p data-firmware="none">
        Firmware: <span class="muted">no staged rollout has offered this device anything, so its running version is not known.</span>
      </p>
    );
  return (
    <p data-firmware={firmware.phase}>
      Firmware: {firmware.runningVersion ? <>running <strong>{firmware.runningVersion}</strong> · </> : <span class="muted">running version not reported · </span>}
      <span class={`badge offer-${firmware.phase}`}>{firmware.phase}</span> {devicePhaseText(firmware)}
      <span class="muted">
        {' '}
        · <a href={href(`/rollouts/${encodeURIComponent(firmware.rolloutId)}`)}>its rollout</a> (stage {firmware.stage}), last moved {ago(firmware.updatedAt)}
      </span>
    </p>
  );
}
