//! The simulated fleet: users and devices with ids shaped as in production, a skewed size
//! per owner drawn with the profile's seeded RNG, and which devices are hot.

use std::collections::HashSet;

use rand::rngs::StdRng;
use rand::Rng;
use rand_distr::{Distribution, LogNormal, Zipf};
use shared::model::ids::{DeviceId, OrgId, UserId};

use super::profile::Error;
use super::profile::{FleetSize, Profile};

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The simulated user number `i`: shaped like a Cognito `sub` (a UUID), as in production.
pub fn user_id(i: u64) -> UserId {
    let h = splitmix(i);
    let l = splitmix(h);
    UserId::parse(format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        (l >> 48) & 0xfff,
        l & 0xffff_ffff_ffff
    ))
    .expect("hex digits and dashes form a valid id")
}

/// The simulated device `j` of user `i`: `dev-` and 12 hex digits, unique per (i, j).
pub fn device_id(i: u64, j: u64) -> DeviceId {
    let h = splitmix(splitmix(i) ^ j.wrapping_mul(0x2545_F491_4F6C_DD1D));
    DeviceId::parse(format!("dev-{:012x}", h & 0xffff_ffff_ffff)).expect("valid id")
}

/// The simulated organization number `k`: `o` and 20 hex digits, as generated.
pub fn org_id(k: u64) -> OrgId {
    OrgId::parse(format!(
        "o{:04x}{:016x}",
        k & 0xffff,
        splitmix(k ^ 0x6f72_6773)
    ))
    .expect("hex digits form a valid id")
}

/// Member `m` of organization `k`: a person like any user (a UUID `sub`), numbered apart from
/// the fleets' owners.
pub fn member_id(k: u64, m: u64) -> UserId {
    user_id((1 << 62) | (k << 32) | m)
}

fn draw_fleet(size: &FleetSize, rng: &mut StdRng) -> Result<u32, Error> {
    Ok(match size {
        FleetSize::Fixed { devices } => *devices,
        FleetSize::Lognormal { median, sigma, max } => {
            let d = LogNormal::new(median.ln(), *sigma).map_err(|e| format!("lognormal: {e}"))?;
            (d.sample(rng).round() as u32).clamp(1, *max)
        }
        FleetSize::Zipf { max, exponent } => {
            let d = Zipf::new(f64::from(*max), *exponent).map_err(|e| format!("zipf: {e}"))?;
            (d.sample(rng) as u32).clamp(1, *max)
        }
    })
}

/// The drawn fleet: one size per owner (ordinary users, then large fleets, each with its own
/// rate when it has one), the totals, and the hot devices (by their number in fleet order).
pub(super) struct Fleet {
    pub(super) sizes: Vec<(u32, Option<f64>)>,
    pub(super) devices: u64,
    pub(super) users: u64,
    pub(super) hot: HashSet<u64>,
    /// The organizations' fleets: (index in `sizes`, organization), after the large fleets.
    pub(super) orgs: Vec<(u64, OrgId)>,
}

impl Fleet {
    /// Draws the fleet of `profile` with `rng`.
    pub(super) fn draw(profile: &Profile, rng: &mut StdRng) -> Result<Self, Error> {
        // The fleet: one size per user (ordinary users, then large fleets) and who is hot.
        let mut fleets: Vec<(u32, Option<f64>)> = Vec::with_capacity(profile.users as usize);
        for _ in 0..profile.users {
            fleets.push((draw_fleet(&profile.devices_per_user, rng)?, None));
        }
        for large in &profile.large_fleets {
            for _ in 0..large.owners {
                fleets.push((large.devices, large.events_per_device_per_minute));
            }
        }
        let mut orgs = Vec::new();
        for (k, org) in profile.organizations.iter().enumerate() {
            orgs.push((fleets.len() as u64, org_id(k as u64)));
            fleets.push((org.devices, org.events_per_device_per_minute));
        }
        let devices: u64 = fleets.iter().map(|(n, _)| u64::from(*n)).sum();
        let users = fleets.len() as u64;
        let hot: HashSet<u64> = match &profile.events.hot_devices {
            Some(h) if devices > 0 => {
                let count = h.count.min(devices);
                let mut set = HashSet::new();
                while (set.len() as u64) < count {
                    set.insert(rng.random_range(0..devices));
                }
                set
            }
            _ => HashSet::new(),
        };
        Ok(Self {
            sizes: fleets,
            devices,
            users,
            hot,
            orgs,
        })
    }

    /// The owner key of fleet `i`: `org:{orgId}` for an organization's, else a person's id.
    pub(super) fn owner(&self, i: u64) -> UserId {
        match self.org_of(i) {
            Some(k) => UserId::org_fleet(&self.orgs[k].1),
            None => user_id(i),
        }
    }

    /// Which organization fleet `i` is, if it is one (its place in the profile's list).
    pub(super) fn org_of(&self, i: u64) -> Option<usize> {
        self.orgs.iter().position(|(index, _)| *index == i)
    }
}
