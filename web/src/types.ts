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
}

export interface Profile {
  userId: string;
  name: string;
}

export const STATUSES = ['active', 'inactive', 'maintenance', 'error'];
