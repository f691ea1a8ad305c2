import type { Connectivity, DeviceAlarms } from './alarms';
import type { ApiEvent, Value } from './format';

export interface Reading {
  value: Value;
  at: string;
}

export interface Device {
  deviceId: string;
  name: string;
  type: string;
  status: string;
  tags: string[];
  version: number;
  createdAt: string;
  updatedAt: string;
  lastSeen?: string | null;
  latest?: Record<string, Reading>;
  recent?: ApiEvent[];
  /** On the dashboard (AP-DASH): online, offline, or unknown (no reporting interval known yet). */
  connectivity?: Connectivity;
  /** On the dashboard (AP-DASH): the device's active alarms. */
  alarms?: DeviceAlarms;
  /** Seconds between reports the owner expects (offline detection), when set. */
  reportEverySeconds?: number | null;
}

export interface Profile {
  userId: string;
  name: string;
}

export const STATUSES = ['active', 'inactive', 'maintenance', 'error'];
