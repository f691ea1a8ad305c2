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
  /** AP-DASH and AP-03: online, offline (an offline alarm is open) or unknown (never reported). */
  connectivity?: Connectivity;
  /** AP-DASH and AP-03: the device's open alarms, how many and the highest severity. */
  alarms?: DeviceAlarms;
  /** Seconds between reports the owner expects (offline detection), when set. */
  reportEverySeconds?: number | null;
  /** The interval learned from its reports, used when none is declared. */
  learnedEverySeconds?: number | null;
  twin?: Twin;
}

/** The device twin (docs/design.md section 12): versions always, documents on a device's read. */
export interface Twin {
  desiredVersion: number;
  reportedVersion: number;
  inSync: boolean;
  openCommands: number;
  desired?: Record<string, unknown>;
  reported?: Record<string, unknown>;
  delta?: Record<string, unknown>;
}

/** A command queued for a device (AP-T2, AP-T3). */
export interface Command {
  commandId: string;
  name: string;
  status: 'queued' | 'delivered' | 'succeeded' | 'failed' | 'expired';
  createdAt: string;
  expiresAt: string;
}

export interface Profile {
  userId: string;
  name: string;
}

export const STATUSES = ['active', 'inactive', 'maintenance', 'error'];
